"""Built-in scenario files, installed as ``harness._scenarios``."""
