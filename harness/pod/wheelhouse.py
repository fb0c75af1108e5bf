"""A wheelhouse made from the controller's own environment: set up workers with no network.

A local pod's bare workers (and an air-gapped pod's) install what the controller runs from
wheels of the very distributions installed here: each installed distribution is packed back
into a wheel from its ``RECORD`` (the files the installer wrote), so a worker gets the same
versions, bytes and tags. Scripts are left out (pip writes a distribution's console scripts
again from its entry points) and so are the harness itself (it travels as an archive, see
``sync``) and the installer's own records. Built once per set of installed versions.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import os
import posixpath
import re
import shutil
import sys
import zipfile
from pathlib import Path

#: Never packed: the harness (sent as an archive) and pip (every virtualenv has its own).
SKIPPED = {"harness", "pip"}
#: Written by the installer, not part of the wheel.
_INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


class WheelhouseError(RuntimeError):
    """A distribution cannot be packed back into a wheel; the message names it."""


def normalize(name: str) -> str:
    """A distribution's name as wheel file names and requirements compare it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, metadata.Distribution]:
    """The controller's distributions by normalized name (the first on sys.path wins)."""
    out: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = normalize(dist.metadata["Name"] or "")
        if name and name not in SKIPPED and name not in out:
            out[name] = dist
    return out


def key(dists: dict[str, metadata.Distribution]) -> str:
    """One digest of every (name, version) packed: a changed environment is a new house."""
    text = "\n".join(f"{n}=={d.version}" for n, d in sorted(dists.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_dir(version: tuple[int, int] | None = None) -> Path:
    """``$HARNESS_CACHE_DIR/wheelhouse/pyX.Y``, else ``~/.cache/harness/wheelhouse/pyX.Y``:
    one place per Python (``version``, default this one's), since a wheel built for one
    (``cp311``) is not for another."""
    major, minor = version or sys.version_info[:2]
    root = os.environ.get("HARNESS_CACHE_DIR")
    if root:
        return Path(root).resolve() / "wheelhouse" / f"py{major}.{minor}"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(cache) / "harness" / "wheelhouse" / f"py{major}.{minor}"


def build_for(python: Path, version: tuple[int, int]) -> Path:
    """The wheelhouse of another interpreter's environment (the local pod's ``--python``),
    built by that interpreter, running this harness's own copy of this module."""
    import subprocess

    here = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get(
        "PYTHONPATH")]))}
    done = subprocess.run([str(python), "-m", "harness.pod.wheelhouse", str(default_dir(version))],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=3600)
    if done.returncode != 0 or not done.stdout.strip():
        raise WheelhouseError(f"{python} could not pack its own environment into wheels: "
                              f"{(done.stderr or done.stdout).strip()[-400:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def version_in(house: Path, name: str) -> str | None:
    """The version of ``name`` a built house holds (its ``.complete`` list), if any."""
    try:
        lines = (Path(house) / ".complete").read_text().splitlines()
    except OSError:
        return None
    return next((line.split("==", 1)[1] for line in lines
                 if line.split("==", 1)[0] == normalize(name) and "==" in line), None)


def build(dest: Path) -> Path:
    """The wheelhouse of this environment under ``dest/KEY`` (built once; reused after, and
    the houses of environments this one replaced removed: torch alone is most of a GB)."""
    dists = installed()
    house = Path(dest) / key(dists)
    if (house / ".complete").exists():
        return house
    for old in Path(dest).glob("*") if Path(dest).is_dir() else ():
        shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(house, ignore_errors=True)
    part = house.with_name(house.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    for dist in dists.values():
        if _editable(dist):
            continue
        repack(dist, part)
    (part / ".complete").write_text("\n".join(sorted(f"{n}=={d.version}"
                                                     for n, d in dists.items())) + "\n")
    os.replace(part, house)
    return house


def _editable(dist: metadata.Distribution) -> bool:
    import json

    try:
        data = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return False
    return bool(isinstance(data, dict) and (data.get("dir_info") or {}).get("editable"))


def _tag(dist: metadata.Distribution) -> str:
    """The wheel's compressed tag set (``py2.py3-none-any``) from its ``Tag:`` lines."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip().split("-") for line in wheel.splitlines()
            if line.startswith("Tag:")]
    if not tags:  # an old install with no WHEEL file: pure Python is the safe guess
        return "py3-none-any"
    return "-".join(".".join(dict.fromkeys(t[i] for t in tags)) for i in range(3))


def repack(dist: metadata.Distribution, into: Path) -> Path:
    """``dist`` as a wheel in ``into``: its installed files, its dist-info, a fresh RECORD."""
    name = dist.metadata["Name"]
    files = dist.files
    if files is None:
        raise WheelhouseError(f"{name} {dist.version} lists no files (no RECORD): it cannot be "
                              "packed back into a wheel; reinstall it with pip")
    # the installed dist-info's own name: pip checks that it matches the wheel's name
    info_dir = next((posixpath.dirname(str(f)) for f in files
                     if str(f).endswith(".dist-info/METADATA") and "/" not in
                     posixpath.dirname(str(f))), f"{re.sub(r'[-_.]+', '_', name)}-{dist.version}"
                    ".dist-info")
    stem = info_dir.removesuffix(".dist-info")
    wheel = into / f"{stem}-{_tag(dist)}.whl"
    entry_scripts = _console_scripts(dist)
    record: list[tuple[str, str, int]] = []
    tmp = wheel.with_suffix(".part")
    # stored, not deflated: a worker unpacks it at disk speed, and torch is most of it
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
        for rel in files:
            arcname = _arcname(str(rel), stem, entry_scripts)
            path = Path(dist.locate_file(rel))
            if arcname is None or not path.is_file() or (
                    posixpath.dirname(arcname) == info_dir
                    and posixpath.basename(arcname) in _INSTALLER_FILES):
                continue
            record.append(_write(zf, arcname, path))
        lines = [f"{a},sha256={h},{n}" for a, h, n in record] + [f"{info_dir}/RECORD,,"]
        zf.writestr(f"{info_dir}/RECORD", "\n".join(lines) + "\n")
    os.replace(tmp, wheel)
    return wheel


def _console_scripts(dist: metadata.Distribution) -> set[str]:
    return {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}


def _arcname(rel: str, stem: str, entry_scripts: set[str]) -> str | None:
    """Where an installed file goes in the wheel (None: left out)."""
    if "__pycache__" in rel.split("/") or rel.endswith(".pyc"):
        return None
    if not rel.startswith("../"):
        return rel
    # outside site-packages: relative to the environment's prefix (lib/pythonX.Y/site-packages)
    parts = rel.split("/")
    while parts and parts[0] == "..":
        parts.pop(0)
    if not parts:
        return None
    if parts[0] == "bin":
        if parts[-1] in entry_scripts:
            return None  # pip writes it again from the entry point, for the worker's Python
        return posixpath.join(f"{stem}.data", "scripts", *parts[1:])
    if parts[0] == "include":
        return posixpath.join(f"{stem}.data", "headers", *parts[2:] or parts[1:])
    return posixpath.join(f"{stem}.data", "data", *parts)


def _write(zf: zipfile.ZipFile, arcname: str, path: Path) -> tuple[str, str, int]:
    digest = hashlib.sha256()
    info = zipfile.ZipInfo.from_file(path, arcname)
    info.compress_type = zipfile.ZIP_STORED
    size = 0
    with open(path, "rb") as src, zf.open(info, "w") as out:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    h = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    return arcname, h, size


def main(argv: list[str] | None = None) -> None:
    """``python -m harness.pod.wheelhouse DEST``: build this interpreter's house under DEST
    and print where it is (what ``build_for`` runs in another interpreter)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m harness.pod.wheelhouse DEST")
    print(build(Path(args[0])))


if __name__ == "__main__":
    main()
