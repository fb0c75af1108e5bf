"""A minimal PJRT-style training entry point: the launcher calls xmp.spawn."""

import sys

import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr


def _mp_fn(index, tag):
    ordinals = xm.rendezvous(tag, str(xr.global_ordinal()).encode())
    xm.master_print(f"{tag}: {len(ordinals)} ranks joined: {b','.join(ordinals).decode()}")
    assert index == xr.global_ordinal(), (index, xr.global_ordinal())


if __name__ == "__main__":
    xmp.spawn(_mp_fn, args=(sys.argv[1] if len(sys.argv) > 1 else "hello",))
