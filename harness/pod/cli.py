"""``harness pod``: run the catalog on a pod, and provision the pod it runs on."""

from __future__ import annotations

import click


@click.group("pod")
def pod() -> None:
    """Run scenarios on real TPU VMs over SSH (or on a local pod of SSH servers)."""
