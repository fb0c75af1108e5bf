"""Where a run's reports go: one new directory per run under the report dir, as Jepsen's store.

Two runs that share a ``--report-dir`` (CI jobs, a user and a script) must
neither fail nor read each other's half-written files, and a run must never
overwrite an earlier one's reports. So every run writes into its own directory,
``<report dir>/<UTC timestamp>-<pid>-<random>``, created before any world starts
(a report dir that cannot take it is refused at once, not after the whole run);
every file is written under a unique temporary name in its own directory and
renamed into place; and ``<report dir>/latest`` is a symlink to the newest
complete run, swapped in by a rename once all of that run's reports are written.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import secrets
import tempfile
from pathlib import Path

from harness.vocabulary import UsageError

log = logging.getLogger(__name__)

#: The symlink to the newest complete run in a report dir.
LATEST = "latest"


class ReportDirError(UsageError, OSError):
    """The report dir cannot hold a run's reports; the message names it and says why."""


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``path`` so that readers see the old file or the whole new one, never a part.

    The temporary file gets a unique name in the same directory (same filesystem,
    so the rename is atomic), so concurrent writers of one path never share it.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide reports from others
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _read_umask() -> int:
    """The process's umask; read once at import, since reading it means setting it."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


#: What ``run_dir_name`` makes, and so the only text of a ``latest`` the harness made.
_RUN_DIR = re.compile(r"\d{8}T\d{6}\.\d{3}Z-\d+-[0-9a-f]{6}")


def check_latest(report_dir: Path) -> Path:
    """``<report dir>/latest``, refused unless it is absent or the harness's own: a
    symlink to a sibling run directory. Anything else (a file, a directory, a link to
    ``/`` or to the user's own files) was made by someone else and is never replaced."""
    latest = report_dir / LATEST
    if not os.path.lexists(latest):
        return latest
    text = os.readlink(latest) if latest.is_symlink() else None
    if text is None or not _RUN_DIR.fullmatch(text):
        what = f"a symlink to {text}" if text is not None else "not a symlink"
        raise ReportDirError(f"{latest} is {what}, not one the harness made (those point to a "
                             "run directory beside it); move it away, it is never replaced")
    return latest


def run_dir_name(now: datetime.datetime | None = None) -> str:
    """``20261123T091754.123Z-4242-9f3c1a``: sorts by time; pid and randomness keep it unique."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"
    return f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"


def new_run_dir(report_dir: str | Path) -> Path:
    """Create this run's own directory under ``report_dir`` (created if needed), or refuse.

    Called before any world starts, so an unusable report dir costs nothing. An
    existing name is never reused: ``mkdir`` fails rather than share a directory.
    """
    report_dir = Path(report_dir)
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
        check_latest(report_dir)
        for _ in range(100):
            run_dir = report_dir / run_dir_name()
            try:
                run_dir.mkdir()
            except FileExistsError:
                continue
            return run_dir
        raise ReportDirError(f"no unused run directory name in {report_dir}")
    except ReportDirError:
        raise
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ReportDirError(f"cannot write reports to {report_dir}: {reason}"
                             + (f" ({exc.filename})" if exc.filename
                                and Path(exc.filename) != report_dir else "")) from exc


def point_latest(run_dir: Path) -> Path:
    """Make ``<report dir>/latest`` point to ``run_dir``, swapped in by one rename.

    A reader that follows ``latest`` sees the previous run or this one, whole.
    """
    report_dir = run_dir.parent
    latest = check_latest(report_dir)
    tmp = report_dir / f".{LATEST}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    os.symlink(run_dir.name, tmp)
    try:
        os.replace(tmp, latest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    log.debug("%s -> %s", latest, run_dir.name)
    return latest


__all__ = ["LATEST", "ReportDirError", "atomic_write_text", "new_run_dir", "point_latest",
           "run_dir_name"]
