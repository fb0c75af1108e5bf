"""The data-sharding builder: a small, valid dataset on disk, and its variants.

``build(inputs, topology, seed)`` is the workload's ``setup``: it returns the
files (``Leftover``) placed in the world's sandbox before any rank starts.
Everything is deterministic from the cell's seed and the inputs.

The dataset, in ``inputs["data_dir"]`` (default ``/mnt/data/puzzles``), is laid
out like the seed's puzzle datasets (seed 000, docs/seeds.md: "data/sudoku-*.npy", read with
NumPy memory-maps), reduced to what sharding needs:

- ``inputs.npy``: int32 ``(N, 1 + seq_len)``; column 0 is the **sample id**,
  the rest are tokens. Rows are stored in a seeded build order, so a loader
  must read the id column (a row index is not an id).
- ``labels.npy``: int32 ``(N, 1 + seq_len)``; column 0 repeats the sample id.
- ``puzzle_indices.npy``: int64 ``(P + 1,)``: puzzle ``p`` is rows
  ``[puzzle_indices[p], puzzle_indices[p + 1])``; every puzzle has
  ``examples_per_puzzle`` rows, or ``puzzle_sizes`` in turn (groups of different
  sizes, as real ARC-like data has) (1 for sudoku-like data, more for ARC-like data
  with several examples per puzzle).
- ``dataset.json``: the manifest: version, counts, and the shape, dtype and
  sha256 of every ``.npy`` file as built.

Sample ids are ``0 .. N-1`` in the canonical version ("v1"). A divergent
version ("v2", a dataset rebuilt differently) has ids from 1,000,000 on, other
tokens and another row order, and the same shapes unless
``divergent_num_samples`` says otherwise: only a content hash tells them apart.

Variants, all from inputs (a host-scoped data path is needed for the per-host
ones: the default '/' of every topology, or a ``scope: host`` mount; on a
``scope: shared`` mount there is one copy, which they would overwrite):

- ``missing_on_hosts: [3]``: those hosts have no dataset at all;
- ``truncated_on_hosts: [1]``: those hosts' ``inputs.npy`` is its first half (a copy
  interrupted: the header intact, the rows cut);
- ``divergent_on_hosts: [2]``: those hosts have version v2;
- ``corrupt_file: inputs.npy``: bytes of that file garbled after the manifest
  was written (bit rot, a bad copy), on ``corrupt_on_hosts`` (default: every
  host that has the data). ``corrupt_where: data`` (default) garbles
  ``corrupt_rows`` whole rows, id column included, behind an intact header, so
  ``np.load`` succeeds and returns wrong values; ``header`` garbles the .npy
  header, so ``np.load`` raises;
- an uneven sample count is just ``num_samples`` not divisible by
  ``global_batch_size``.

The checker's ground truth (which ids make the epoch, the global batch size)
is written to ``EXPECTED_PATH`` on every host and recorded through the
workload's ``watch``: the ranks never need to read it.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.filesystem.sandbox import Leftover
from harness.roles import Roles
from harness.topology import Topology
from harness.vocabulary import TRUTH_DIR

if TYPE_CHECKING:
    from harness.workloads.data_sharding.workload import DataShardingInputs

#: Where the builder leaves the checker's ground truth (on every host's '/').
EXPECTED_PATH = f"{TRUTH_DIR}/data-sharding/expected.json"
#: The .npy files of a dataset, in the order the manifest lists them.
ARRAYS = ("inputs.npy", "labels.npy", "puzzle_indices.npy")
MANIFEST = "dataset.json"
DIVERGENT_ID_START = 1_000_000
VOCAB_SIZE = 11  # pad 0 and the digits 1-9, plus one: sudoku-like tokens
DEFAULT_DATA_DIR = "/mnt/data/puzzles"


def data_dir(inputs: dict[str, Any]) -> str:
    """Where a loader finds the dataset, from the ``inputs`` dict its ``run`` received."""
    return str(inputs.get("data_dir") or DEFAULT_DATA_DIR).rstrip("/")


@dataclass(frozen=True)
class Version:
    name: str
    id_start: int
    num_samples: int
    seed: int


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


def npy_data_offset(data: bytes) -> int:
    """Where the array's bytes start in a .npy file (after magic and header)."""
    f = io.BytesIO(data)
    major, _ = np.lib.format.read_magic(f)
    if major == 1:
        np.lib.format.read_array_header_1_0(f)
    else:
        np.lib.format.read_array_header_2_0(f)
    return f.tell()


def puzzle_bounds(n: int, examples_per_puzzle: int, sizes: tuple[int, ...] = ()) -> np.ndarray:
    """``puzzle_indices``: puzzles of ``examples_per_puzzle`` rows, or of ``sizes`` in turn
    (the last one takes what is left)."""
    if not sizes:
        return np.arange(n // examples_per_puzzle + 1, dtype=np.int64) * examples_per_puzzle
    bounds = [0]
    while bounds[-1] < n:
        bounds.append(min(n, bounds[-1] + sizes[(len(bounds) - 1) % len(sizes)]))
    return np.asarray(bounds, dtype=np.int64)


def build_version(version: Version, seq_len: int, examples_per_puzzle: int,
                  puzzle_sizes: tuple[int, ...] = ()) -> dict[str, bytes]:
    """Every file of one dataset version: ``{file name: bytes}``."""
    n = version.num_samples
    rng = np.random.default_rng([version.seed, version.id_start, n])
    ids = version.id_start + rng.permutation(n)  # the build order of the rows
    tokens = rng.integers(1, VOCAB_SIZE, size=(n, seq_len), dtype=np.int32)
    inputs = np.concatenate([ids[:, None].astype(np.int32), tokens], axis=1)
    # A label per token, as a puzzle's solution: here a fixed function of the input.
    labels = np.concatenate([ids[:, None].astype(np.int32), (tokens % 9) + 1], axis=1)
    puzzle_indices = puzzle_bounds(n, examples_per_puzzle, puzzle_sizes)
    puzzles = len(puzzle_indices) - 1
    files = {"inputs.npy": _npy(inputs), "labels.npy": _npy(labels),
             "puzzle_indices.npy": _npy(puzzle_indices)}
    arrays = {"inputs.npy": inputs, "labels.npy": labels, "puzzle_indices.npy": puzzle_indices}
    manifest = {
        "version": version.name, "num_samples": n, "seq_len": seq_len, "vocab_size": VOCAB_SIZE,
        "examples_per_puzzle": None if puzzle_sizes else examples_per_puzzle,
        "puzzle_sizes": list(puzzle_sizes) or None, "total_puzzles": puzzles,
        "files": {name: {"shape": list(arrays[name].shape), "dtype": str(arrays[name].dtype),
                         "sha256": hashlib.sha256(files[name]).hexdigest()} for name in ARRAYS},
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return files


def corrupt(data: bytes, where: str, rows: int, row_bytes: int, seed: int) -> bytes:
    """``data`` with bytes garbled: whole rows behind the header, or the header itself.

    Every garbled byte changes (``+1..255 mod 256``), so every garbled row's id
    changes: the damage is certain, not likely.
    """
    rng = random.Random(f"harness-data-corrupt-{seed}")
    out = bytearray(data)
    offset = npy_data_offset(data)
    if where == "header":
        start, stop = 0, min(offset, 16)  # the magic and the start of the header dict
    else:
        total_rows = (len(data) - offset) // row_bytes
        rows = max(1, min(rows, total_rows))
        first = rng.randrange(total_rows - rows + 1)
        start = offset + first * row_bytes
        stop = start + rows * row_bytes
    for i in range(start, stop):
        out[i] = (out[i] + 1 + rng.randrange(255)) % 256
    return bytes(out)


def truncated(data: bytes) -> bytes:
    """What an interrupted copy leaves: the first half of the file (mid-row, mid-record)."""
    return data[:len(data) // 2 + 1]


def expected_of(inputs: DataShardingInputs) -> dict[str, Any]:
    """The checker's ground truth: the canonical version's ids and the global batch size."""
    return {"data_dir": inputs.data_dir.rstrip("/"), "version": "v1", "id_start": 0,
            "num_samples": inputs.num_samples, "global_batch_size": inputs.global_batch_size}


def build(inputs: DataShardingInputs, topology: Topology, seed: int,
          roles: Roles | None = None) -> list[Leftover]:
    """The workload's setup: the dataset (and its variants) on every host, and the ground truth.

    ``inputs`` were validated at load (sizes, budgets, hosts of the topology): used as they
    are. With ``inputs.data`` (the user's own dataset), that is copied instead
    (``own_data``), its variants aimed at the files ``roles`` say the target read.
    """
    if inputs.data is not None:
        from harness.workloads.data_sharding import own_data

        files, acted, touched = own_data.build(inputs, topology, seed, roles)
        truth = {"identity": "content", "data_dir": inputs.data_dir.rstrip("/"),
                 "data": inputs.data, "global_batch_size": inputs.global_batch_size,
                 "acted_on": acted, "touched": touched}
        return [*files, Leftover(EXPECTED_PATH, json.dumps(truth, sort_keys=True).encode())]
    n, k, seq_len = inputs.num_samples, inputs.examples_per_puzzle, inputs.seq_len
    missing, divergent = set(inputs.missing_on_hosts), set(inputs.divergent_on_hosts)
    corrupt_file, where = inputs.corrupt_file, inputs.corrupt_where
    corrupt_hosts = (set(inputs.corrupt_on_hosts) if inputs.corrupt_on_hosts is not None
                     else set(range(topology.hosts)))
    n2 = inputs.divergent_num_samples or n

    sizes = tuple(inputs.puzzle_sizes)
    versions = {"v1": build_version(Version("v1", 0, n, seed), seq_len, k, sizes)}
    if divergent:
        versions["v2"] = build_version(Version("v2", DIVERGENT_ID_START, n2, seed + 1), seq_len, k,
                                       sizes)

    def files_of(host: int) -> tuple[tuple[str, bytes], ...] | None:
        if host in missing:
            return None
        files = dict(versions["v2" if host in divergent else "v1"])
        if corrupt_file is not None and host in corrupt_hosts:
            row_bytes = 4 * (1 + seq_len) if corrupt_file != "puzzle_indices.npy" else 8
            files[corrupt_file] = corrupt(files[corrupt_file], where, inputs.corrupt_rows,
                                          row_bytes, seed)
        if host in inputs.truncated_on_hosts:
            files["inputs.npy"] = truncated(files["inputs.npy"])
        return tuple(sorted(files.items()))

    out = placed(files_of, topology, inputs.data_dir)
    out.append(Leftover(EXPECTED_PATH, json.dumps(expected_of(inputs), sort_keys=True).encode()))
    return out


def placed(files_of: Callable[[int], tuple[tuple[str, bytes], ...] | None], topology: Topology,
           data_dir: str) -> list[Leftover]:
    """Each host's files (``files_of(host)``: name -> bytes, None: no dataset) under
    ``data_dir``, one copy per distinct set of hosts."""
    by_content: dict[tuple[tuple[str, bytes], ...], list[int]] = {}
    for host in range(topology.hosts):
        files = files_of(host)
        if files is not None:
            by_content.setdefault(files, []).append(host)
    root = data_dir.rstrip("/")
    out: list[Leftover] = []
    for files, hosts in by_content.items():
        which = None if len(hosts) == topology.hosts else tuple(hosts)
        out += [Leftover(f"{root}/{name}", content, hosts=which) for name, content in files]
    return out


def watch(inputs: DataShardingInputs) -> list[str]:
    del inputs
    return [EXPECTED_PATH]


def expected_from_files(files: dict[int, dict[str, str]]) -> dict[str, Any] | None:
    """The ground truth as the world's watched files recorded it (any rank's copy)."""
    for per_rank in files.values():
        text = per_rank.get(EXPECTED_PATH)
        if text:
            return json.loads(text)
    return None

