"""How much does a long history cost the harness? Peak RSS of the harness process.

    python benchmarks/bench_history.py [--calls 131072] [--topology 4x1]

Runs one world whose ranks make ``--calls`` collective calls in all (an empty
``xm.rendezvous`` in a loop, split over the ranks) and prints the peak RSS of
the harness process (``ru_maxrss``: the coordinator, the history, the
WorldResult) and the size of the history it returned. The world runs in a fresh
interpreter so that its peak is its own. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys


def calls(n: int) -> int:
    """The target: ``n`` empty rendezvous on this rank."""
    import torch_xla.core.xla_model as xm

    for _ in range(n):
        xm.rendezvous("step")
    return n


_CHILD = """
import json, resource, sys
from harness.world.world import run_world
from harness.topology import get_topology
calls, topology = int(sys.argv[1]), sys.argv[2]
per_rank = calls // get_topology(topology).world_size
result = run_world(sys.argv[3] + ":calls", topology=topology, args=(per_rank,), timeout=600,
                   preload=())
dropped = getattr(result, "dropped", None)
print(json.dumps({"outcome": result.outcome, "events": len(result.history),
                  "json_bytes": len(json.dumps([e.to_dict() for e in result.history])),
                  "dropped": dropped.message() if dropped else None,
                  "duration_s": result.duration_s,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=131_072)
    parser.add_argument("--topology", default="4x1")
    args = parser.parse_args()
    out = subprocess.run([sys.executable, "-c", _CHILD, str(args.calls), args.topology, __file__],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        sys.exit(2)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    for key, value in figures.items():
        print(f"{key:>12}: {value}")


if __name__ == "__main__":
    main()
