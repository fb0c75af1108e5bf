"""Each host of a world its own network, as each TPU VM is (issue 47): a stranger's config
sync through a fixed port on ``127.0.0.1`` (``tests/user_targets/loopback_sync.py``) reaches
rank 0 from rank 0's host only. Under kernel isolation the ``isolated-tmp`` cell (a v4-64
pod: 8 hosts, a rank each) fails as the pod would; under python isolation, where the hosts share
the machine's one loopback, the sync passes and the cell says that network was the
machine's."""

from __future__ import annotations

import pytest

from harness.rank import namespaces
from harness.runner.run import plan_cells, run_matrix
from harness.scenarios import find
from harness.workloads.registry import target as resolve_target
from harness.world.fates import SHARED_NETWORK
from harness.world.result import PASS

from support import REPO

TARGET = f"{REPO / 'tests' / 'user_targets' / 'loopback_sync.py'}:sync"


def _cell(monkeypatch: pytest.MonkeyPatch, isolation: str):
    monkeypatch.setenv("HARNESS_ISOLATION", isolation)
    plans = plan_cells([find("isolated-tmp")], [resolve_target(TARGET)], seed=0)
    [cell] = run_matrix(plans).cells
    assert cell.isolation == isolation, cell.isolation
    return cell


@pytest.mark.skipif(bool(namespaces.unavailable()), reason="no namespaces here")
def test_a_sync_through_loopback_fails_across_hosts_under_kernel_isolation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cell = _cell(monkeypatch, "kernel")
    assert cell.outcome != PASS, cell.detail
    rows = {r.rank: r for r in cell.ranks}
    # every other host's rank was refused by its own loopback, as on a pod
    for rank in range(1, 8):
        assert (rows[rank].error or "").startswith("ConnectionRefusedError"), rows[rank]
    assert SHARED_NETWORK not in cell.detail


def test_under_python_isolation_the_cell_says_the_network_was_the_machines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cell = _cell(monkeypatch, "python")
    assert cell.outcome == PASS, cell.detail
    assert f"ranks 0-7 {SHARED_NETWORK}" in cell.detail, cell.detail
