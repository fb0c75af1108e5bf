"""Workloads: one package each (its ``workload.py``, reference targets and files),
what a workload is (``base``), and how the harness finds them (``registry``)."""
