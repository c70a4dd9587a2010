"""yarn_adapt/tuning."""
