"""The same code on every worker: this harness, and the user's code at one commit.

The harness goes as an archive of the package this controller runs (shim and
catalog included), unpacked once per version under ``~/.harness-pod/lib/KEY``:
a worker runs exactly the harness that judges it. The user's code goes as
seed 002 (docs/seeds.md) syncs it: every worker fetches the commit from the repository's
remote and checks out the detached ``FETCH_HEAD``; a working tree that is
not committed and pushed goes as an archive of its files instead (``archive``).
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import shlex
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.pod.spec import REMOTE_ROOT
from harness.vocabulary import UsageError

_SKIP = {"__pycache__", ".git", ".venv", ".ci-venv", "reports", ".pytest_cache", ".mypy_cache"}


class SyncError(UsageError, RuntimeError):
    """The user's code cannot be sent as asked; the message says what to do."""


def harness_archive() -> tuple[str, bytes]:
    """(key, tar.gz) of the running harness: the package, its shim and its catalog."""
    from harness.rank.environment import shim_root
    from harness.scenarios import catalog_dir

    package = Path(__file__).resolve().parents[1]
    members = [(package, "harness"), (Path(shim_root()), "harness/_shims"),
               (Path(catalog_dir()), "harness/_scenarios")]
    return _archive(members)


def _archive(members: list[tuple[Path, str]]) -> tuple[str, bytes]:
    files: list[tuple[str, Path]] = []
    for root, name in members:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if any(part in _SKIP for part in rel.parts) or not path.is_file():
                continue
            files.append((posixpath.join(name, *rel.parts), path))
    return _tarball(files)


def _tarball(files: list[tuple[str, Path]]) -> tuple[str, bytes]:
    """(key, tar.gz) of ``(name in the archive, file)`` pairs: the key is a digest of names
    and contents, the same for the same files whatever their times (an unpack is done once
    per key), executables kept executable."""
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for arcname, path in sorted(set(files)):
            data = path.read_bytes()
            digest.update(arcname.encode() + b"\0" + data)
            info = tarfile.TarInfo(arcname)
            info.size, info.mtime = len(data), 0
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            tar.addfile(info, io.BytesIO(data))
    return digest.hexdigest()[:16], buf.getvalue()


def lib_dir(key: str) -> str:
    """Where a harness archive is unpacked, relative to the worker's home."""
    return posixpath.join(REMOTE_ROOT, "lib", key)


def unpack_command(archive: str, target: str) -> str:
    """Unpack ``archive`` into ``target`` once (a complete unpack is marked, never redone)."""
    a, t = shlex.quote(archive), shlex.quote(target)
    return (f"cd ~ && if [ ! -e {t}/.complete ]; then rm -rf {t} && mkdir -p {t} && "
            f"tar -xzf {a} -C {t} && touch {t}/.complete; fi")


# -- the user's code ------------------------------------------------------------

@dataclass(frozen=True)
class CodeSource:
    """How the user's code reaches the workers, and where it lands there."""

    mode: str  # "fetch" (each worker fetches the commit) or "archive" (pushed over SFTP)
    root: Path  # the repository's top (or the directory) on this machine
    subdir: str  # the working directory inside it, where targets are resolved
    commit: str | None = None  # fetch: the commit every worker checks out
    remote: str | None = None  # fetch: the URL the workers fetch from
    archive: bytes | None = None
    key: str = ""

    @property
    def remote_dir(self) -> str:
        """The code's directory on a worker, relative to its home."""
        name = f"{self.root.name}-{(self.commit or self.key)[:12]}"
        return posixpath.join(REMOTE_ROOT, "code", name)

    @property
    def workdir(self) -> str:
        return posixpath.join(self.remote_dir, self.subdir) if self.subdir else self.remote_dir


def _git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SyncError(f"git {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
    return out.stdout.strip()


def code_source(cwd: str | Path, mode: str = "auto", remote: str | None = None) -> CodeSource:
    """How to send the code under ``cwd``: ``fetch`` a pushed commit, or ``archive`` the tree.

    ``auto`` fetches when the tree is a clean git checkout whose HEAD is on a remote
    (the workers can get exactly it), and archives otherwise, saying nothing is lost.
    """
    cwd = Path(cwd).resolve()
    try:
        top = Path(_git(cwd, "rev-parse", "--show-toplevel"))
    except (SyncError, OSError):
        if mode == "fetch":
            raise SyncError(f"{cwd} is not in a git repository: there is no commit to fetch "
                            "(use --sync archive)") from None
        return _archive_source(cwd, cwd, None)
    subdir = str(cwd.relative_to(top)) if cwd != top else ""
    if mode == "archive":
        return _archive_source(top, cwd, top)
    commit = _git(top, "rev-parse", "HEAD")
    dirty = bool(_git(top, "status", "--porcelain", "--untracked-files=no"))
    url = remote or _remote_url(top)
    if mode == "fetch":
        if url is None:
            raise SyncError(f"{top} has no remote to fetch from (add one, or use --sync archive)")
        if dirty:
            raise SyncError(f"{top} has uncommitted changes the workers would not get: commit "
                            "and push them, or use --sync archive")
        return CodeSource("fetch", top, subdir, commit=commit, remote=url)
    if url is not None and not dirty:
        return CodeSource("fetch", top, subdir, commit=commit, remote=url)
    return _archive_source(top, cwd, top)


def _remote_url(top: Path) -> str | None:
    try:
        names = _git(top, "remote").split()
    except SyncError:
        return None
    if not names:
        return None
    name = "origin" if "origin" in names else names[0]
    url = _git(top, "remote", "get-url", name)
    if "://" not in url and ":" not in url.split("/")[0]:  # a local path: absolute, as workers read it
        url = str((top / url).resolve())
    return url


def _archive_source(root: Path, cwd: Path, top: Path | None) -> CodeSource:
    if top is not None:
        listed = _git(top, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
        files = [(name, top / name) for name in listed
                 if name and (top / name).is_file() and not _skipped(name)]
    else:
        files = [(str(p.relative_to(root)), p) for p in sorted(root.rglob("*"))
                 if p.is_file() and not _skipped(str(p.relative_to(root)))]
    key, archive = _tarball(files)
    subdir = str(cwd.relative_to(root)) if cwd != root else ""
    return CodeSource("archive", root, subdir, archive=archive, key=key)


def _skipped(rel: str) -> bool:
    return any(part in _SKIP for part in Path(rel).parts)


def fetch_command(source: CodeSource) -> str:
    """Seed 002's sync: fetch the one commit, check out the detached FETCH_HEAD."""
    assert source.commit is not None and source.remote is not None
    d = shlex.quote(source.remote_dir)
    return (f"cd ~ && mkdir -p {d} && cd {d} && (git rev-parse --git-dir >/dev/null 2>&1 || "
            f"git init -q .) && git fetch -q --depth=1 {shlex.quote(source.remote)} "
            f"{shlex.quote(source.commit)} && git checkout -q --detach FETCH_HEAD && "
            "git rev-parse HEAD")


def explain_fetch(stderr: str, source: CodeSource) -> str:
    """A failed fetch in words: the commit missing from the remote is the usual cause."""
    text = " ".join(stderr.split())
    short = (source.commit or "")[:12]
    if any(s in text for s in ("not our ref", "couldn't find remote ref", "no such remote ref",
                               "upload-pack: not our ref", "did not send all necessary objects")):
        return (f"commit {short} is not on {source.remote}: push it (or run with --sync "
                f"archive); git said: {text[-300:]}")
    return f"cannot fetch commit {short} from {source.remote}: {text[-300:] or 'git failed'}"
