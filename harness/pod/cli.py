"""``harness pod``: run the catalog on a pod, and provision the pod it runs on."""

from __future__ import annotations

import click


@click.group("pod")
def pod() -> None:
    """Run scenarios on real TPU VMs over SSH (or on a local pod of SSH servers)."""


# --- provisioning through gcloud (harness.pod.cloud): provision, release, sweep ---------

EXIT_POD_FAILED = 4  # the pod (here: the cloud) failed, not the target: as `harness pod run`


class _Duration(click.ParamType):
    """``90s``, ``60m``, ``6h``: a usage error (exit 2) naming the option otherwise."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from harness.pod.cloud import parse_duration

        if isinstance(value, int):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _cloud_failed(exc: Exception) -> None:
    """A CloudError as one line on stderr, exit 4: the cloud failed, not the target."""
    click.echo(f"harness pod: {' '.join(str(exc).split())}", err=True)
    raise SystemExit(EXIT_POD_FAILED)


def _where(f):  # noqa: ANN001, ANN202 - a click decorator stack
    f = click.option("--project", default=None, help="Google Cloud project (default: gcloud's).")(f)
    f = click.option("--zone", required=True, help="The TPU's zone, e.g. us-central2-b.")(f)
    return f


@pod.command("provision")
@click.option("--name", required=True, help="Name of the queued resource and of its TPU node.")
@_where
@click.option("--type", "accelerator_type", required=True, help="Accelerator type, e.g. v4-64.")
@click.option("--runtime-version", required=True, help="TPU VM runtime, e.g. tpu-ubuntu2204-base.")
@click.option("--ttl", default="6h", show_default=True, type=_Duration(),
              help="Label it harness-ttl=<now + TTL>: `harness pod sweep` deletes it after that.")
@click.option("--wait", "wait_s", default="60m", show_default=True, type=_Duration(),
              help="Give up (and delete the request) if it is not ACTIVE by then.")
@click.option("--poll", "poll_s", default="30s", show_default=True, type=_Duration(),
              help="How often to ask for the request's state.")
@click.option("--spot", is_flag=True, help="Spot TPUs: cheaper, and may be pre-empted at any time.")
@click.option("--ssh-public-key", type=click.Path(dir_okay=False), default=None,
              help="Put this key in the TPU's ssh-keys metadata (with --ssh-user), for `pod run`.")
@click.option("--ssh-user", default=None, help="The user that key logs in as on every worker.")
def provision_command(name: str, zone: str, project: str | None, accelerator_type: str,
                      runtime_version: str, ttl: int, wait_s: int, poll_s: int, spot: bool,
                      ssh_public_key: str | None, ssh_user: str | None) -> None:
    """Request a TPU as a queued resource and wait until it is ACTIVE (exit 4 if not)."""
    from harness.pod.cloud import CloudError, provision, ssh_keys_entry

    ssh_key = None
    if (ssh_public_key is None) != (ssh_user is None):
        raise click.UsageError("--ssh-public-key and --ssh-user go together")
    if ssh_public_key is not None and ssh_user is not None:
        try:
            ssh_key = ssh_keys_entry(ssh_user, ssh_public_key)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--ssh-public-key/--ssh-user") from None
    if ttl <= wait_s:
        raise click.BadParameter(f"{ttl}s must be longer than --wait ({wait_s}s), or the sweep "
                                 "could delete the TPU while this run waits for it",
                                 param_hint="--ttl")
    try:
        node = provision(name, zone, accelerator_type, runtime_version, project=project,
                         ttl=f"{ttl}s", wait_s=wait_s, spot=spot, poll_s=poll_s, ssh_key=ssh_key)
    except CloudError as exc:
        _cloud_failed(exc)
    hosts = ", ".join(w.host for w in node.workers)
    click.echo(f"{node.name} in {node.zone}: {node.accelerator_type}, {node.state}, "
               f"{len(node.workers)} workers: {hosts}")


@pod.command("release")
@click.option("--name", required=True, help="The queued resource and TPU node to delete.")
@_where
def release_command(name: str, zone: str, project: str | None) -> None:
    """Delete the TPU node, then its queued resource (either may be gone already)."""
    from harness.pod.cloud import CloudError, release

    try:
        deleted = release(name, zone, project)
    except CloudError as exc:
        _cloud_failed(exc)
    click.echo(f"deleted {', '.join(deleted)}" if deleted else f"nothing named {name} in {zone}")


@pod.command("sweep")
@_where
@click.option("--prefix", default="harness-", show_default=True,
              help="Only names starting with this are touched.")
def sweep_command(zone: str, project: str | None, prefix: str) -> None:
    """Delete the TPUs and queued resources named PREFIX... whose harness-ttl has passed."""
    from harness.pod.cloud import CloudError, sweep

    try:
        deleted = sweep(zone, project, prefix=prefix)
    except CloudError as exc:
        _cloud_failed(exc)
    click.echo(f"deleted {', '.join(deleted)}" if deleted else
               f"nothing past its ttl named {prefix}* in {zone}")
