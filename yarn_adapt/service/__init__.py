"""yarn_adapt/service."""
