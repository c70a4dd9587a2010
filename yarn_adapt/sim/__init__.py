"""yarn_adapt/sim."""
