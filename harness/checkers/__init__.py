"""Checkers: pure functions from a world's results and history to an outcome."""
