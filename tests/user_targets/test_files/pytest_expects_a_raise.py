import pytest
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp


def _fn(index):
    if xm.get_ordinal() == 0:
        raise RuntimeError("boom")


def test_spawn_raises():
    with pytest.raises(Exception):  # noqa: B017 - whatever xmp.spawn re-raises
        xmp.spawn(_fn, args=())
