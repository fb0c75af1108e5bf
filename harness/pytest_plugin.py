"""The pytest face: the ``faults`` marker and a fixture that runs a function
across a harness world.

    def test_config_sync(harness_world):
        result = harness_world("mypkg.sync:load_synced_config", topology="v4-64")
        assert_world_passed(result)

A failing assertion prints every rank's fate, the mismatches the coordinator
saw and the stacks of hung ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.world.result import PASS, WorldResult
from harness.world.world import run_world


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: a harness fault-injection test (run with -m faults)")


class WorldFailed(AssertionError):
    """A world that should have passed did not; the message is the full diagnosis."""


def assert_world_passed(result: WorldResult) -> None:
    if result.outcome != PASS:
        raise WorldFailed(result.describe())


@pytest.fixture
def harness_world() -> Callable[..., WorldResult]:
    """``harness_world(target, topology=..., timeout=..., **run_world_options)``."""

    def run(target: Any, **options: Any) -> WorldResult:
        options.setdefault("timeout", 30.0)
        return run_world(target, **options)

    return run
