import unittest

import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_multiprocessing as xmp


def _fn(index):
    if xm.get_ordinal() == 1:
        raise ValueError("bad shard on rank 1")


class TestSpawn(unittest.TestCase):
    def test_every_rank_loads_its_shard(self):
        xmp.spawn(_fn, args=())


if __name__ == "__main__":
    unittest.main()
