"""The shim on its own: imported without the harness, run in-process on a LocalRuntime.

The shim reaches a world only through the runtime protocol it defines
(``torch_xla._internal.runtime``). These tests install its one-rank
``LocalRuntime`` in the pytest process itself: no world, no fork, no harness.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402 - after the skip

from support import SHIMS  # noqa: E402


def test_the_shim_imports_and_refuses_use_without_the_harness(tmp_path):
    # A python that cannot see the harness at all (-I: no PYTHONPATH, -S: no site-packages).
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SHIMS!r})
        import torch_xla, torch_xla.core.xla_model as xm, torch_xla.runtime as xr
        import torch_xla.distributed.xla_multiprocessing as xmp
        assert not [m for m in sys.modules if m.split(".")[0] == "harness"], sorted(sys.modules)
        try:
            import harness
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError("harness is importable: the test proves nothing")
        print(torch_xla.__version__)
        try:
            xr.world_size()
        except RuntimeError as exc:
            print(exc)
    """)
    # the machine's time: a bound, so a stuck run fails the test instead of hanging it
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "2.9.0+harness",
        "the harness torch_xla shim was imported outside a harness world; "
        "run the code with `harness exec` or `harness.run_world`",
    ]


def test_without_a_runtime_every_use_raises_the_clear_error(shim):
    torch_xla, xm, xr, _ = shim
    from torch_xla._internal import runtime

    runtime.install(None)
    for use in (torch_xla.device, xr.global_ordinal, lambda: xm.rendezvous("x")):
        with pytest.raises(RuntimeError, match="imported outside a harness world"):
            use()


@pytest.mark.parametrize("shim", ["legacy"], indirect=True)
def test_legacy_profile_keeps_the_xrt_names(shim):
    torch_xla, xm, xr, _ = shim
    assert (xm.get_ordinal(), xm.xrt_world_size()) == (0, 1)
    assert xr.using_pjrt()
    assert torch_xla.__version__ == "2.0.0+harness"
    import torch_xla.distributed.xla_dist  # noqa: F401 - exists under legacy only


@pytest.mark.parametrize("shim", ["current"], indirect=True)
def test_current_profile_drops_the_xrt_names(shim):
    torch_xla, xm, xr, _ = shim
    assert not hasattr(xm, "get_ordinal") and not hasattr(xm, "xrt_world_size")
    assert not hasattr(xr, "using_pjrt")
    assert torch_xla.__version__ == "2.9.0+harness"
    with pytest.raises(ModuleNotFoundError):
        import torch_xla.distributed.xla_dist  # noqa: F401


def test_one_rank_world_as_the_runtime_reports_it(shim):
    torch_xla, xm, xr, local = shim
    assert not local.used()
    assert (xr.global_ordinal(), xr.world_size(), xr.local_ordinal(), xr.host_index()) == (0, 1, 0, 0)
    assert local.used()
    assert xm.get_local_ordinal() == 0 and xm.is_master_ordinal(local=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert xm.xla_device() == torch.device("xla", 0)
    assert torch_xla.device() == torch.device("xla", 0)  # every process's is xla:0 under PJRT


def test_set_device_type_only_before_the_runtime_is_used(shim):
    _, _, xr, _ = shim
    xr.set_device_type("TPU")
    assert xr.device_type() == "TPU"
    xr.global_ordinal()
    xr.set_device_type("TPU")  # the same type again: the real one accepts it (issue 11, bug 6)
    with pytest.raises(RuntimeError, match="after XLA runtime is initialized"):
        xr.set_device_type("CPU")


def test_collectives_of_one_rank(shim, monkeypatch):
    _, xm, _, _ = shim
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    reduced = xm.all_reduce(xm.REDUCE_SUM, t)
    assert torch.equal(reduced, t) and reduced is not t
    assert torch.equal(xm.all_gather(t, dim=1), t)
    assert torch.equal(xm.reduce_scatter(xm.REDUCE_SUM, t, 1.0, 0, 1), t)
    assert torch.equal(xm.collective_permute(t, [[0, 0]]), t)
    assert torch.equal(xm.collective_permute(t, []), torch.zeros_like(t))
    assert xm.rendezvous("tag", b"payload") == [b"payload"]
    assert xm.mesh_reduce("tag", 3, sum) == 3
    # XLA_ALWAYS_ALLREDUCE sends even a world of one through the runtime's collective.
    monkeypatch.setenv("XLA_ALWAYS_ALLREDUCE", "1")
    assert torch.equal(xm.all_reduce(xm.REDUCE_SUM, t, scale=0.5), t * 0.5)
    tensors = [t.clone(), torch.ones(4)]
    assert xm.all_reduce(xm.REDUCE_MAX, tensors) is tensors
    assert torch.equal(tensors[1], torch.ones(4))


def test_send_and_recv_in_a_world_of_one(shim):
    _, xm, _, _ = shim
    xm.send(torch.tensor([1.0, 2.0]), channel_id=7)
    out = torch.zeros(2)
    assert torch.equal(xm.recv(out, channel_id=7), torch.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="would block forever"):
        xm.recv(out, channel_id=7)


def test_xmp_spawn_in_a_rank_calls_fn_with_its_ordinal(shim):
    import torch_xla.distributed.xla_multiprocessing as xmp

    seen = []
    xmp.spawn(seen.append, args=())
    assert seen == [0]


def test_torch_distributed_with_the_xla_backend(shim):
    import torch_xla.distributed.xla_backend  # noqa: F401 - registers 'xla' and 'xla://'

    dist.init_process_group("xla", init_method="xla://")
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "xla")
    t = torch.tensor([2.0, 3.0])
    dist.all_reduce(t)
    assert torch.equal(t, torch.tensor([2.0, 3.0]))
    gathered = [torch.zeros(2)]
    dist.all_gather(gathered, t)
    assert torch.equal(gathered[0], t)


def test_both_runtimes_answer_the_whole_protocol(shim):
    from torch_xla._internal import runtime

    from harness.rank.runtime import HarnessRuntime

    protocol = runtime.Runtime
    members = {n for n in vars(protocol) if not n.startswith("_")} | set(protocol.__annotations__)
    assert {"profile", "ordinal", "collective", "send", "recv", "spawn", "run_script"} <= members
    for implementation in (runtime.LocalRuntime("current"), HarnessRuntime()):
        missing = {n for n in members
                   if not hasattr(type(implementation), n) and n not in vars(implementation)}
        assert not missing, (type(implementation).__name__, missing)


def test_all_gather_refuses_a_tuple_and_a_scalar_as_the_real_one_does(shim):
    """Issue 11, bug 7: a tuple is not a list of tensors (TypeError), and a 0-dim tensor has
    no dimension to gather along (IndexError), even in a world of one."""
    _, xm, _, _ = shim
    with pytest.raises(TypeError, match="needs to be a Tensor or a list of Tensors"):
        xm.all_gather((torch.ones(2), torch.ones(2)), pin_layout=False)
    with pytest.raises(IndexError, match="no dimensions"):
        xm.all_gather(torch.tensor(3.0))
    assert xm.all_gather(torch.ones(2)).shape == (2,)


def test_output_of_another_shape_takes_the_results_shape_and_value(shim):
    """Issue 11, bug 3: the real out-collectives replace the output's value and shape; a
    copy into it refused another shape (or broadcast into a larger one, silently)."""
    _, xm, _, _ = shim
    value = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    smaller, larger = torch.zeros(1), torch.zeros(4, 2, 3)
    assert xm.all_gather(value, output=smaller) is smaller
    assert smaller.shape == (2, 3) and torch.equal(smaller, value)
    assert xm.all_gather(value, output=larger) is larger
    assert larger.shape == (2, 3) and torch.equal(larger, value)
    out = torch.zeros(5)
    shard = xm.reduce_scatter(xm.REDUCE_SUM, value, 1.0, 0, 1, output=out)
    assert shard is out and out.shape == (2, 3) and torch.equal(out, value)


def test_to_the_device_copies_as_a_transfer_to_a_tpu_does(shim):
    """Issue 11, bug 8: ``.to(device)`` returned the CPU tensor itself, so an in-place
    collective on the "device" tensor changed the caller's source; on a TPU the device
    tensor is another buffer (upstream's test_mp_replication compares the two)."""
    torch_xla, _, _, _ = shim
    device = torch_xla.device()
    ones = torch.ones(2, 3)
    xones = ones.to(device)
    assert xones is not ones and xones.data_ptr() != ones.data_ptr()
    xones.add_(1.0)  # as a list all_reduce, dist.all_reduce or dist.broadcast write it
    assert torch.equal(ones, torch.ones(2, 3)) and torch.equal(xones, torch.full((2, 3), 2.0))
    for moved in (ones.to(device=device), ones.to(device, torch.float64), ones.to("xla"),
                  ones.to(torch.device("xla", 0), non_blocking=True)):
        assert moved.data_ptr() != ones.data_ptr() and moved.device == torch.device("xla", 0)
    assert ones.to(torch.float64).dtype == torch.float64  # other moves are untouched
    assert ones.to("cpu") is ones
    assert xones.to(device) is xones  # already there: the real one returns it
    for back in (xones.cpu(), xones.to("cpu"), xones.to(torch.device("cpu"), torch.float64)):
        assert type(back) is torch.Tensor and back.device.type == "cpu"
        assert back.data_ptr() != xones.data_ptr()  # the host's own buffer
    from torch_xla.debug import metrics

    before = metrics.counter_value("CreateDataHandles")
    ones.to(device)
    assert metrics.counter_value("CreateDataHandles") == before + 1  # counted as a transfer
    grad = torch.ones(2, requires_grad=True)
    assert grad.to(device).grad_fn is not None  # a transfer is differentiable, as the real one
    model = torch.nn.Linear(2, 2)
    weight = model.weight
    assert model.to(device) is model and model.weight is weight  # moved in place, as the real


def test_a_device_tensor_is_xla_to_python_and_cpu_bytes_underneath(shim):
    """torch_xla 2.9's device tensors say ``xla:0``; code branches on it (upstream's
    test_mp_sync_batch_norm compared a shard with the whole batch while they said cpu)."""
    import io
    import pickle

    torch_xla, _, _, _ = shim
    device = torch_xla.device()
    made = [torch.zeros(3, device=device), torch.tensor([1.0, 2.0], device=device),
            torch.arange(4, device=device), torch.randn(2, device=device),
            torch.full((2,), 7.0, device=device), torch.empty(2, 2, device="xla:0")]
    for t in made:
        assert t.device == torch.device("xla", 0), t
        assert (t * 2).device.type == "xla" and t.sum().device.type == "xla"  # ops keep it
    x = made[1]
    assert repr(x) == "tensor([1., 2.], device='xla:0')"
    assert torch.zeros(2, device=x.device).device.type == "xla"  # a device read back works
    # pickled and saved as plain CPU tensors: a checkpoint reads back without the shim
    assert type(pickle.loads(pickle.dumps(x))) is torch.Tensor
    saved = io.BytesIO()
    torch.save({"x": x}, saved)
    saved.seek(0)
    loaded = torch.load(saved)["x"]
    assert type(loaded) is torch.Tensor and torch.equal(loaded, torch.tensor([1.0, 2.0]))
    # a module's output is on the device; its parameters keep their class (a departure)
    model = torch.nn.Linear(2, 1).to(device)
    assert model(x.unsqueeze(0)).device.type == "xla"
    assert model.weight.device.type == "cpu"
