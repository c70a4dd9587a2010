"""yarn_adapt."""
