"""The faults: primitives, their deterministic triggers, the rank-side engine."""
