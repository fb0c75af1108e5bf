"""The legacy per-host launcher, ``python -m torch_xla.distributed.xla_dist``.

The real one (removed after 2.0) ran on a controller, SSHed into every TPU VM
and started the command after ``--`` once per host with XRT_* exported. Under
``harness exec`` each host's launcher process already has that environment,
so here the command simply runs in place, once per host.
"""

from __future__ import annotations

import os
import sys

from torch_xla._internal import link
from torch_xla._internal import runtime as _runtime

if link.since("2.1"):  # removed with XRT in 2.1
    raise ModuleNotFoundError("No module named 'torch_xla.distributed.xla_dist'",
                              name="torch_xla.distributed.xla_dist")

_PYTHONS = ("python", "python3", os.path.basename(sys.executable))


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        raise SystemExit("xla_dist: expected '-- python script.py ...' after the launcher flags")
    command = args[args.index("--") + 1:]
    if not command or os.path.basename(command[0]) not in _PYTHONS:
        raise SystemExit(f"xla_dist under harness: the command must start with python, got {command[:1]}")
    _runtime.current().run_script(tuple(command[1:]))


if __name__ == "__main__":
    main()
