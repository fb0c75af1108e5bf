"""Installed as ``harness._shims``: the directory put first on a rank's sys.path."""
