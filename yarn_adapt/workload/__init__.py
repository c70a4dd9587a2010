"""yarn_adapt/workload."""
