"""yarn_adapt/yarn."""
