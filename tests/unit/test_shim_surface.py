"""Every public module and name of the real torch_xla 2.9 imports under the shim.

The list is the real wheel's (``shims/torch_xla/_internal/real_surface.py``,
written by ``tools/torch_xla_surface.py``). Each name is either the shim's
working implementation or a stand-in whose use raises ``NotModelledError``
naming it; never an AttributeError or ModuleNotFoundError. The shim runs
in-process here on its one-rank LocalRuntime.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import re
import subprocess
import sys
import textwrap
import zipfile

import pytest

torch = pytest.importorskip("torch")

from support import REPO, SHIMS, local_shim, purge_shim  # noqa: E402

ROOT = str(REPO)


def _load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REAL = _load("_real_surface", os.path.join(SHIMS, "torch_xla", "_internal", "real_surface.py"))
GENERATOR = _load("_surface_generator", os.path.join(ROOT, "tools", "torch_xla_surface.py"))


@pytest.fixture
def shim():
    """A fresh import of the shim with a LocalRuntime (a world of one) installed."""
    with local_shim("current"):
        import torch_xla

        yield torch_xla


def test_the_list_is_the_real_wheels():
    assert REAL.VERSION == "2.9.0"
    assert re.fullmatch(r"[0-9a-f]{64}", REAL.SHA256)
    assert REAL.WHEEL.startswith("torch_xla-2.9.0-")
    # What issue 11 found missing is in the list, so the walk below covers it.
    for module in ("torch_xla.debug.metrics", "torch_xla.core.functions", "torch_xla.utils.utils",
                   "torch_xla._internal.pjrt", "torch_xla._internal.tpu",
                   "torch_xla.core.xla_env_vars", "torch_xla.distributed.fsdp"):
        assert module in REAL.MODULES
    assert {"reduce_scatter_bucketized", "all_gather_bucketized", "add_step_closure",
            "all_reduce_bucketized_gradients", "send_cpu_data_to_device", "set_rng_state",
            "get_memory_info", "is_xla_tensor", "do_on_ordinals"} <= \
        set(REAL.MODULES["torch_xla.core.xla_model"])
    assert {"manual_seed", "step", "compile", "sync"} <= set(REAL.MODULES["torch_xla"])


@pytest.mark.parametrize("module_name", sorted(REAL.MODULES))
def test_every_real_module_imports_and_every_name_answers(shim, module_name):
    from torch_xla._internal.surface import NotModelledError, is_stand_in

    module = importlib.import_module(module_name)
    for name, kind in REAL.MODULES[module_name].items():
        value = getattr(module, name)
        qualname = f"{module_name}.{name}"
        alias = REAL.ALIASES.get(qualname)
        if alias is not None:
            assert value is sys.modules[alias], qualname
        elif is_stand_in(value):
            with pytest.raises(NotModelledError, match=re.escape(qualname) + " is not modelled"):
                value()
            with pytest.raises(NotModelledError, match=re.escape(qualname + ".anything")):
                value.anything  # noqa: B018 - the lookup is the test
        elif kind in ("function", "class"):
            assert callable(value), qualname


def test_a_name_the_real_package_lacks_is_still_an_attribute_error(shim):
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.fsdp as fsdp

    with pytest.raises(AttributeError, match="has no attribute 'no_such_api'"):
        xm.no_such_api  # noqa: B018
    with pytest.raises(AttributeError):
        fsdp.no_such_api  # noqa: B018
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("torch_xla.no_such_module")
    # Removed in 2.7: not in 2.9's list, so still missing under the current profile.
    with pytest.raises(AttributeError):
        xm.xrt_world_size  # noqa: B018


def test_stand_ins_subclass_and_introspect_as_a_script_needs(shim):
    from torch_xla._internal.surface import NotModelledError
    from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

    class Mine(FSDP):  # a script's own subclass defines at import
        pass

    assert not isinstance(object(), FSDP)
    assert not hasattr(FSDP, "__wrapped__")
    with pytest.raises(NotModelledError, match="XlaFullyShardedDataParallel is not modelled"):
        Mine(torch.nn.Linear(2, 2))
    assert issubclass(NotModelledError, NotImplementedError)


def test_every_unmodelled_api_raises_the_one_error(shim):
    from torch_xla._internal import pjrt
    from torch_xla._internal.surface import NotModelledError

    with pytest.raises(NotModelledError, match=r"^torch_xla\._internal\.pjrt\.spawn_threads is not "
                       r"modelled by the harness: .* \(one thread per device is v2/v3's layout; "
                       r"the harness runs one process per chip\)$"):
        pjrt.spawn_threads(print)
    assert shim.__version__ == "2.9.0+harness"


def test_importing_the_shim_does_not_import_torch():
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SHIMS!r})
        import torch_xla, torch_xla.debug.metrics, torch_xla.core.xla_model
        import torch_xla.utils.utils, torch_xla.core.xla_env_vars, torch_xla.runtime
        import torch_xla._internal.pjrt, torch_xla._internal.tpu, torch_xla.debug.profiler
        import torch_xla.distributed.fsdp, torch_xla.distributed.spmd
        torch_xla.distributed.fsdp.XlaFullyShardedDataParallel
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- what is modelled behaves as the real one ----------------------------------

def test_utils(shim, monkeypatch):
    import torch_xla.utils.utils as xu

    monkeypatch.setenv("SHIM_FLAG", "0")
    assert xu.getenv_as("SHIM_FLAG", bool, True) is False
    assert xu.getenv_as("SHIM_UNSET", int, 7) == 7
    monkeypatch.setenv("SHIM_FLAG", "true")
    assert xu.check_env_flag("SHIM_FLAG") and not xu.check_env_flag("SHIM_UNSET")
    data = {"a": (torch.ones(1), 3), "b": [torch.zeros(2)]}
    doubled = xu.for_each_instance_rewrite(data, lambda v: isinstance(v, torch.Tensor),
                                           lambda t: t + 1)
    assert doubled["a"][0].tolist() == [2.0] and doubled["a"][1] == 3
    assert isinstance(doubled["a"], list)  # a tuple comes back a list, as in the real one
    seen: list = []
    xu.for_each_instance(data, lambda v: isinstance(v, torch.Tensor), seen.append)
    assert len(seen) == 2
    assert list(xu.SampleGenerator(5, 3)) == [5, 5, 5]
    assert xu.flatten_nested_tuple(((1, 2), [3, (4,)])) == (1, 2, 3, 4)
    assert xu.shape([[1, 2], [3, 4], [5, 6]]) == [3, 2]
    assert xu.parallel_work(2, lambda x: x * x, [1, 2, 3]) == [1, 4, 9]
    assert len(set(xu.get_free_tcp_ports(2))) == 2


def test_env_vars_are_the_real_names(shim):
    import torch_xla.core.xla_env_vars as xenv

    assert xenv.TPU_MESH_CTLER_ADDR == "TPU_MESH_CONTROLLER_ADDRESS"
    for name in REAL.MODULES["torch_xla.core.xla_env_vars"]:
        if name not in ("TPU_MESH_CTLER_ADDR", "TPU_MESH_CTLER_PORT"):
            assert getattr(xenv, name) == name


def test_rng_state_seeds_the_device_generator(shim):
    import torch_xla.core.xla_model as xm

    assert xm.get_rng_state() == 101  # the real device context's first seed
    shim.manual_seed(1234)
    assert xm.get_rng_state() == 1234
    first = torch.randn(4, device=shim.device())
    xm.set_rng_state(1234)
    assert torch.equal(torch.randn(4, device=shim.device()), first)
    with xm.fork_rng():
        xm.set_rng_state(7)
        torch.randn(3)
    assert xm.get_rng_state() == 1234


def test_is_xla_tensor_does_not_start_the_runtime(shim):
    import torch_xla.core.xla_model as xm
    from torch_xla._internal import runtime

    assert xm.is_xla_tensor(torch.ones(1)) and not runtime.current().used()


def test_device_helpers(shim):
    import torch_xla.core.xla_model as xm

    assert xm.is_xla_tensor(torch.ones(1).to(shim.device()))
    assert shim.device_count() == 1 and shim.real_devices() == ["TPU:0"]
    assert xm.xla_replication_devices() == ["TPU:0"]
    info = xm.get_memory_info()
    assert set(info) == {"bytes_used", "bytes_limit", "peak_bytes_used"}
    assert 0 < info["bytes_used"] <= info["peak_bytes_used"] and info["bytes_limit"] > 0
    moved = xm.send_cpu_data_to_device({"x": torch.ones(2), "n": 3}, shim.device())
    assert moved["n"] == 3 and moved["x"].tolist() == [1.0, 1.0]
    assert [t.tolist() for t in xm.send_cpu_data_to_device(torch.ones(1), shim.device())] == [[1.0]]


def test_step_closures_wait_for_the_step_marker(shim):
    import torch_xla.core.xla_model as xm

    ran: list = []
    xm.add_step_closure(ran.append, args=(1,))
    xm.add_step_closure(ran.append, args=(2,), run_async=True)
    assert ran == []
    with pytest.warns(DeprecationWarning, match="torch_xla.sync"):
        xm.mark_step()
    assert ran == [2, 1]  # the real one starts the async closures first
    shim.sync()
    assert ran == [2, 1]

    @shim.compile
    def body():
        xm.add_step_closure(ran.append, args=(3,))
        ran.append("body")

    body()
    assert ran == [2, 1, "body", 3]


def test_autograd_collectives_in_a_world_of_one(shim):
    import torch_xla.core.functions as xf

    x = torch.ones(3, requires_grad=True)
    xf.all_reduce("sum", x, scale=3.0).sum().backward()
    assert x.grad.tolist() == [3.0] * 3
    bn = xf.SyncBatchNorm(2)
    assert bn(torch.randn(4, 2, 3)).shape == (4, 2, 3)


def test_pjrt_and_tpu(shim, monkeypatch):
    from torch_xla._internal import pjrt, tpu
    from torch_xla._internal.surface import NotModelledError

    assert pjrt.run_multiprocess(lambda x, y=0: x + y, 40, y=2) == {0: 42}
    with pytest.raises(NotModelledError, match="spawn_threads is not modelled"):
        pjrt.spawn_threads(print)
    monkeypatch.setenv("TPU_PROCESS_BOUNDS", "2,2,1")
    monkeypatch.setenv("CLOUD_TPU_TASK_ID", "3")
    assert tpu.process_bounds_size() == 4 and tpu.task_id() == 3
    assert tpu.MeshShape.from_string("2,2,1").size == 4
    assert (tpu.num_available_chips(), tpu.worker_id(), tpu.num_tpu_workers()) == (1, 0, 1)
    # tpu-env is what the host's environment says (a harness host carries the topology's)
    for accelerator, version, kind in (("v4-64", 4, "v4"), ("v6e-256", 6, "v6e"),
                                       ("v5litepod-16", 5, "v5litepod")):
        monkeypatch.setenv("TPU_ACCELERATOR_TYPE", accelerator)
        assert (tpu.version(), tpu.get_tpu_type()) == (version, kind)
        assert tpu.get_tpu_env()["ACCELERATOR_TYPE"] == accelerator
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "gpu-8")
    with pytest.raises(OSError, match="Failed to parse TPU version from metadata"):
        tpu.version()


def test_profiler_step_trace_is_a_step_marker(shim):
    import torch_xla.debug.metrics as met
    import torch_xla.debug.profiler as xp

    server = xp.start_server(9012)
    assert server is not None
    before = met.counter_value("MarkStep") or 0
    with xp.StepTrace("train_step", step_num=0), xp.Trace("forward"):
        pass
    assert met.counter_value("MarkStep") == before + 1


def test_torch_compile_openxla_in_a_world_of_one(shim):
    import torch_xla.core.xla_model as xm
    import torch_xla.debug.metrics as met

    fn = torch.compile(lambda x: xm.all_reduce("sum", x * 2) + 1, backend="openxla", fullgraph=True)
    assert fn(torch.ones(2)).tolist() == [3.0, 3.0]
    assert met.counter_value("DynamoExtractCompiledGraph") >= 1


def test_metrics_time_format_is_the_real_one(shim):
    from torch_xla.debug import metrics as met

    # Each part is printed with std::fixed at its precision, so 1.52 s rounds to "02s" and
    # 523.512 ms to "524ms", as MetricFnTime does.
    assert met._time(1_523_512_000.0) == "02s524ms512.000us"
    assert met._time(512.0) == "000.512us"
    assert met._bytes(3 * 1024 * 1024) == "3.00MB"


# -- the generator -------------------------------------------------------------

def test_generator_reads_names_from_a_wheel(tmp_path):
    wheel = tmp_path / "torch_xla-9.9.9-cp311-none-any.whl"
    files = {
        "torch_xla/__init__.py": "from .torch_xla import *\nfrom ._internal import tpu\n"
                                 "import os\nlogger = logging.getLogger(__name__)\n"
                                 "try:\n  dist = probe()\nexcept Exception:\n  pass\n",
        "torch_xla/torch_xla.py": "import sys\ndef sync(): pass\ndef _private(): pass\n",
        "torch_xla/_internal/__init__.py": "",
        "torch_xla/_internal/tpu.py": "from typing import TypeVar\nR = TypeVar('R')\n"
                                      "def version(): pass\n",
        "torch_xla/_internal/hidden.py": "def secret(): pass\n",
        "torch_xla/core/__init__.py": "",
        "torch_xla/core/xla_model.py": "__all__ = ['a']\n__all__ += ['B']\ndef a(): pass\n"
                                       "class B: pass\ndef c(): pass\nx.y = 1\n",
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    wheel.write_bytes(buf.getvalue())
    modules, aliases = GENERATOR.surface(str(wheel))
    assert modules == {
        "torch_xla": {"sync": "function", "tpu": "module"},  # no logger, probe, import, private
        "torch_xla._internal.tpu": {"version": "function"},  # no TypeVar; _internal.hidden: none
        "torch_xla.core": {},
        "torch_xla.core.xla_model": {"a": "function", "B": "class"},  # its __all__
        "torch_xla.torch_xla": {"sync": "function"},
    }
    assert aliases == {"torch_xla.tpu": "torch_xla._internal.tpu"}


def test_the_finder_makes_modules_only_under_the_shim(shim):
    """A finder left behind (a purged shim) never stands in for a torch_xla that is not there."""
    purge_shim()
    sys.path.remove(SHIMS)
    try:
        assert importlib.util.find_spec("torch_xla") is None
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module("torch_xla.distributed.fsdp")
    finally:
        sys.path.insert(0, SHIMS)


def test_the_cpp_bindings_scripts_call(shim):
    """``torch_xla._XLAC``: what upstream scripts call on it works; the rest is a stand-in."""
    import torch_xla.backends
    import torch_xla.debug.metrics as met
    from torch_xla._internal.surface import NotModelledError

    assert torch_xla.backends.get_mat_mul_precision() == "default"
    shim._XLAC._xla_set_mat_mul_precision("highest")  # test_mp_distributed_mm does
    assert torch_xla.backends.get_mat_mul_precision() == "highest"
    with pytest.raises(ValueError, match="Invalid precision: fast"):
        torch_xla.backends.set_mat_mul_precision("fast")
    shim._XLAC._xla_increment_counter("FakeCounter", 2)  # test_metrics does
    assert met.counter_value("FakeCounter") == 2 and shim._XLAC._xla_counter_value("FakeCounter") == 2
    assert shim._XLAC._xla_get_default_device() == "xla:0"
    with pytest.raises(NotModelledError, match=r"torch_xla\._XLAC\._xla_get_tensor_id is not"):
        shim._XLAC._xla_get_tensor_id(torch.ones(1))
