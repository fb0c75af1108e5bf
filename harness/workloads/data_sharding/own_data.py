"""The user's own dataset (``--data DIR``): copied to every host, and its variants.

Harness side, before a world starts. The scenario's builder inputs keep their
meanings, aimed at the files the target's fault-free run read (its ``input``
role under the data directory; every file of the data when the harness saw no
read, as when C code opens them):

- ``missing_on_hosts``: those hosts have no dataset;
- ``truncated_on_hosts``: those hosts' copy of the largest file read is its first half;
- ``divergent_on_hosts``: those hosts have another version of every data file read
  (``another_version``; a one-document ``.json`` manifest is kept);
- ``corrupt_file``: the largest file read is garbled on ``corrupt_on_hosts``
  (``corrupt_where: data``: ``corrupt_rows`` rows behind an intact header for a
  ``.npy``, that many lines of a text file, runs of bytes in the middle of
  anything else; ``header``: its first bytes).

Nothing here reads the user's data format beyond that: the samples are known by
content in the rank (``content``), against what a world of one rank read.
"""

from __future__ import annotations

import io
import json
import os
import random
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.filesystem.sandbox import Leftover
from harness.history import ranks_phrase
from harness.roles import Roles
from harness.topology import Topology
from harness.workloads.data_sharding.dataset import placed, truncated

if TYPE_CHECKING:
    from harness.workloads.data_sharding.workload import DataShardingInputs

#: A world copies the dataset to every host: a small sample of the real one.
MAX_BYTES = 64 << 20
MAX_FILES = 4096
#: Files read as lines (another version: other lines in another order).
TEXT = (".jsonl", ".ndjson", ".csv", ".tsv", ".txt", ".json")


def scan(source: str) -> tuple[list[str], int]:
    """The regular files under ``source`` (relative paths, sorted) and their total size;
    ``ValueError`` saying what makes it unusable as a world's dataset."""
    root = Path(source)
    if not root.is_dir():
        raise ValueError(f"{source} is not a directory")
    names: list[str] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
        dirnames.sort()
        for filename in sorted(filenames):
            path = Path(dirpath, filename)
            if path.is_file():
                if not os.access(path, os.R_OK):
                    raise ValueError(f"cannot read {path}: permission denied")
                names.append(path.relative_to(root).as_posix())
                total += path.stat().st_size
            if len(names) > MAX_FILES or total > MAX_BYTES:
                raise ValueError(f"{source} holds more than {MAX_FILES} files or "
                                 f"{MAX_BYTES >> 20} MiB: every host of a world gets a copy, so "
                                 "give a small sample of the dataset (a few shards)")
    if not names:
        raise ValueError(f"{source} holds no file")
    return names, total


def _raise(exc: OSError) -> None:
    raise ValueError(f"cannot read {exc.filename}: {exc.strerror}")


def fingerprint(source: str) -> str:
    """What changes when the dataset does (names, sizes, modification times): the learned
    reference is kept per fingerprint."""
    names, _ = scan(source)
    stats = [(n, os.stat(os.path.join(source, n))) for n in names]
    return json.dumps([(n, s.st_size, s.st_mtime_ns) for n, s in stats])


def _npy_rows(data: bytes) -> tuple[int, int] | None:
    """Where a .npy file's rows start and how long one is (None: not a .npy with rows)."""
    try:
        f = io.BytesIO(data)
        major, _ = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if major == 1 else \
            np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
    except (ValueError, OSError, SyntaxError, EOFError):
        return None
    if not shape or shape[0] == 0 or dtype.hasobject:
        return None
    return f.tell(), int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize


def _garble(out: bytearray, start: int, stop: int, rng: random.Random) -> None:
    for i in range(start, min(stop, len(out))):
        out[i] = (out[i] + 1 + rng.randrange(255)) % 256


def garbled(name: str, data: bytes, where: str, rows: int, seed: int) -> bytes:
    """``data`` with bytes garbled (every garbled byte changes): rows of a .npy behind its
    header, lines of a text file, or runs of bytes; with ``where="header"``, its first bytes."""
    rng = random.Random(f"harness-own-data-{seed}-{name}")
    out = bytearray(data)
    if where == "header" or len(data) < 32:
        _garble(out, 0, 16, rng)
        return bytes(out)
    npy = _npy_rows(data) if name.endswith(".npy") else None
    if npy is not None and npy[1]:
        offset, row = npy
        total = (len(data) - offset) // row
        count = max(1, min(rows, total))
        first = offset + rng.randrange(total - count + 1) * row
        _garble(out, first, first + count * row, rng)
    elif name.endswith(TEXT):
        lines = data.split(b"\n")
        for k in rng.sample(range(len(lines)), min(rows, len(lines))):
            line = bytearray(lines[k])
            _garble(line, 0, len(line), rng)
            lines[k] = bytes(line).replace(b"\n", b" ")
        return b"\n".join(lines)
    else:
        for _ in range(rows):
            start = rng.randrange(16, len(data) - 8)
            _garble(out, start, start + 8, rng)
    return bytes(out)


def another_version(name: str, data: bytes, seed: int) -> bytes:
    """Another version of a data file, as a dataset rebuilt differently has: a .npy's (or
    .npz's) rows in another order with other values, of the same shapes and dtypes; a text
    file's lines in another order, one record of them revised (as many records, each still
    valid: a loader reads it without complaint, and a checker that counts samples sees the
    same number); anything else garbled in places."""
    rng = np.random.default_rng([seed, len(data)])
    if name.endswith(".npy") and _npy_rows(data) is not None:
        array = np.load(io.BytesIO(data), allow_pickle=False)
        return _saved(_changed(array, rng))
    if name.endswith(".npz"):
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                arrays = {key: _changed(archive[key], rng) for key in archive.files}
        except (ValueError, OSError, zipfile.BadZipFile):
            return garbled(name, data, "data", 4, seed)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()
    if name.endswith(TEXT):
        lines = [line for line in data.split(b"\n") if line.strip()]
        if len(lines) > 1:
            order = rng.permutation(len(lines))
            changed = int(rng.integers(len(lines)))
            return b"\n".join(_revised(lines[i]) if i == changed else lines[i]
                              for i in order) + b"\n"
        return data  # one JSON document (a manifest): a rebuilt dataset keeps its own
    return garbled(name, data, "data", 4, seed)


def _revised(line: bytes) -> bytes:
    """One record as another version of the dataset has it, of the same form: a JSON
    object's first string (else number) value changed, else the line's first field."""
    try:
        record = json.loads(line)
    except ValueError:
        record = None
    if isinstance(record, dict):
        for key, value in record.items():
            if isinstance(value, str):
                record[key] = "revised: " + value  # at its start: a loader may cut a long text
                return json.dumps(record).encode()
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                record[key] = value + 1
                return json.dumps(record).encode()
    for sep in (b",", b"\t", b" "):  # a CSV or TSV field, a text's first word
        head, found, tail = line.partition(sep)
        if found:
            return head + b"2" + found + tail
    return b"2" + line


def _changed(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if array.ndim == 0 or array.dtype.hasobject:
        return array
    out = array[rng.permutation(len(array))] if len(array) > 1 else array.copy()
    if out.dtype.kind in "iuf":
        out = (out + 1).astype(out.dtype)  # no row of the other version is one of this one
    elif out.dtype.kind == "b":
        out = ~out
    return out


def _saved(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def read_by_target(names: list[str], data_dir: str, roles: Roles | None) -> list[str]:
    """The files of the data the target's fault-free run read (all of them if it read none
    the harness saw)."""
    read = set()
    for path in (roles.paths("input") if roles is not None else ()):
        rel = os.path.relpath(path, data_dir)
        if not rel.startswith("..") and rel in names:
            read.add(rel)
    return [n for n in names if n in read] or list(names)


def build(inputs: DataShardingInputs, topology: Topology, seed: int,
          roles: Roles | None) -> tuple[list[Leftover], list[str], list[dict]]:
    """The user's dataset on every host, with the scenario's variants; what the variants
    did, one phrase each, as a cell's detail says it (``host 3 has none of its files``);
    and each change that is there to be read, its hosts and files: a cell whose changed
    copies no rank of those hosts read did not test them."""
    source = str(inputs.data)
    names, _ = scan(source)
    original = {n: Path(source, n).read_bytes() for n in names}
    read = read_by_target(names, inputs.data_dir, roles)
    missing, divergent = set(inputs.missing_on_hosts), set(inputs.divergent_on_hosts)
    corrupt_hosts = (set(inputs.corrupt_on_hosts) if inputs.corrupt_on_hosts is not None
                     else set(range(topology.hosts)))
    acted: list[str] = []
    other = {n: another_version(n, original[n], seed) for n in read} if divergent else {}
    other = {n: data for n, data in other.items() if data != original[n]}
    acted += other
    largest = max(read, key=lambda n: (len(original[n]), n))
    target = largest if inputs.corrupt_file else None
    if target is not None:
        acted.append(target)
    truncated_hosts = set(inputs.truncated_on_hosts)
    if truncated_hosts:
        acted.append(largest)

    def files_of(host: int) -> tuple[tuple[str, bytes], ...] | None:
        if host in missing:
            return None
        files = {**original, **(other if host in divergent else {})}
        if target is not None and host in corrupt_hosts:
            files[target] = garbled(target, files[target], inputs.corrupt_where,
                                    inputs.corrupt_rows, seed)
        if host in truncated_hosts:
            files[largest] = truncated(files[largest])
        return tuple(sorted(files.items()))

    said, touched = [], []
    if missing:
        said.append(f"{ranks_phrase(missing, 'host')} {'has' if len(missing) == 1 else 'have'} "
                    f"none of {inputs.data_dir}'s files")
    if other:
        said.append(f"{ranks_phrase(divergent, 'host')} {'has' if len(divergent) == 1 else 'have'}"
                    f" another version of {_names(sorted(other))}")
        touched.append({"said": said[-1], "hosts": sorted(divergent), "files": sorted(other)})
    if target is not None:
        said.append(f"{target} garbled ({inputs.corrupt_where}) on "
                    f"{ranks_phrase(corrupt_hosts, 'host')}")
    if truncated_hosts:
        said.append(f"{ranks_phrase(truncated_hosts, 'host')}'s copy of {largest} cut in half")
        touched.append({"said": said[-1], "hosts": sorted(truncated_hosts), "files": [largest]})
    return placed(files_of, topology, inputs.data_dir), said, touched


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
