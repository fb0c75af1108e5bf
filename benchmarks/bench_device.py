"""What a device tensor costs: the same ops on the shim's ``xla:0`` tensors and on plain CPU
tensors, measured side by side in one run.

    python benchmarks/bench_device.py [--ops 20000]

A device tensor is a ``torch.Tensor`` subclass whose ops pass through its Python
``__torch_function__`` (``shims/torch_xla/_internal/device.py``): a fixed cost per op, which
this prints next to the op's cost on a plain tensor, for a small op (where the fixed cost
shows most) and a training step of a small model (forward and backward).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "shims"))

import torch  # noqa: E402
from torch_xla._internal import device  # noqa: E402 - the shim's, from this checkout


def per_call(fn, n: int) -> float:
    """Seconds per call of ``fn``, the best of three rounds of ``n``."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20000, help="calls per round of the small op")
    args = parser.parse_args()
    torch.set_num_threads(1)
    xla = device.xla_device()
    small = torch.ones(64, 64)
    small_on = small.to(xla)
    model, batch = torch.nn.Linear(256, 256), torch.randn(32, 256)
    model_on, batch_on = copy.deepcopy(model).to(xla), batch.to(xla)  # .to moves in place
    cases = {
        "64x64 multiply": (lambda: small * 1.0001, lambda: small_on * 1.0001, args.ops),
        "Linear(256) step": (lambda: model(batch).sum().backward(),
                             lambda: model_on(batch_on).sum().backward(), args.ops // 20),
    }
    print(f"{'case':<18} {'cpu':>10} {'xla:0':>10} {'ratio':>7}")
    for name, (plain, dev, n) in cases.items():
        a, b = per_call(plain, n), per_call(dev, n)
        print(f"{name:<18} {a * 1e6:>8.1f}µs {b * 1e6:>8.1f}µs {b / a:>6.2f}x")


if __name__ == "__main__":
    main()
