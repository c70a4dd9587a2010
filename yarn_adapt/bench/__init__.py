"""yarn_adapt/bench."""
