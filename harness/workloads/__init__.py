"""Workloads: the reference targets and the adapter that calls a user's target."""
