"""The world's channel is the world's alone (issue 47): a process outside the world that
finds its socket and says hello as every rank and as the leader, with fake results and
fake exits, is refused unheard; a raising target keeps its ERROR, and the world's own facts
(its history, its clock) never hear of the stranger."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import stat
import struct
import tempfile

import pytest

from harness import ERROR, run_world
from harness.world import world as world_module
from harness.world.server import WorldServer

from support import TARGETS_DIR

TARGET = f"{TARGETS_DIR / 'channel_targets.py'}:raises_after_rendezvous"
NOBODY = 65534
NO_SECRET = object()  # the hello says none at all


def _frame(header: dict, payload: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("!IQ", len(head), len(payload)) + head + payload


def _probe(address: str, world_size: int, secret: object, uid: int | None) -> None:
    """In a forked child: what a stranger sends, on connections of its own, as every rank
    (a result that says the target returned) and as the leader (every rank's exit, clean,
    and the world done). Everything is sent before the child exits; nothing is waited for."""
    code = 1
    try:
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        hello = {} if secret is NO_SECRET else {"secret": secret}
        socks = []
        for rank in range(world_size):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(address)
            socks.append(sock)
            sock.sendall(_frame({"type": "hello", "role": "rank", "id": rank, "channel": "call",
                                 "pid": os.getpid(), **hello})
                         + _frame({"type": "result", "ok": True, "value_repr": "0",
                                   "exit_code": 0}, pickle.dumps(0)))
        leader = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        leader.connect(address)
        socks.append(leader)
        leader.sendall(_frame({"type": "hello", "role": "leader", "id": 0, "channel": "leader",
                               "pid": os.getpid(), **hello})
                       + b"".join(_frame({"type": "exited", "pid": 10_000 + rank, "status": 0,
                                          "unit": ["rank", rank]}) for rank in range(world_size))
                       + _frame({"type": "done", "leftovers": 0, "clean": True}))
        code = 0
    except OSError:
        code = 2  # refused before it could say anything
    finally:
        os._exit(code)


def _probed(monkeypatch: pytest.MonkeyPatch, secret: object, uid: int | None = None
            ) -> tuple[dict, list[int]]:
    """Have a stranger probe the next world once all its ranks are at their rendezvous and
    the last one's call has not been answered yet: every real rank has said hello, and none
    has sent its result. Returns the world's spec as the harness saw it, and the
    stranger's pid and exit status."""
    seen: dict = {}
    stranger: list[int] = []

    class Probed(WorldServer):
        calls = 0

        def _collective(self, sock, conn, msg):  # type: ignore[no-untyped-def]
            Probed.calls += 1
            if Probed.calls == self.spec.topology.world_size:
                seen["spec"] = self.spec
                said = getattr(self.spec, "secret", "") if secret is True else secret
                address = self.spec.address
                if not address.startswith("\0"):
                    seen["dir"] = os.stat(os.path.dirname(address))
                    seen["sock"] = os.stat(address)
                if uid is not None and not address.startswith("\0"):
                    # as if the directory had been opened to everyone: the kernel's word on
                    # the peer is what refuses it now, not the directory's mode
                    for directory in (self.spec.outdir, os.path.dirname(address)):
                        os.chmod(directory, 0o711)
                    os.chmod(address, 0o777)
                pid = os.fork()
                if pid == 0:
                    _probe(address, self.spec.topology.world_size, said, uid)
                _, status = os.waitpid(pid, 0)
                stranger.extend([pid, os.waitstatus_to_exitcode(status)])
            super()._collective(sock, conn, msg)

    monkeypatch.setattr(world_module, "WorldServer", Probed)
    return seen, stranger


def _unheard(result, stranger_pid: int) -> None:
    """The world's verdict and facts are its own ranks' alone."""
    assert [r.outcome for r in result.ranks] == [ERROR] * len(result.ranks)
    for rank in result.ranks:
        assert rank.error is not None and rank.error["type"] == "RuntimeError"
        assert rank.error["message"] == "this target always raises"
        assert rank.pid != stranger_pid and not rank.returned
    assert not [e for e in result.history if e.kind == "protocol"]
    assert stranger_pid not in [e.detail.get("pid") for e in result.history]
    # the world's own clock: the stranger's fake exits made it wait for nothing
    assert result.world_time_s is not None and result.world_time_s < 1.0


@pytest.mark.parametrize("secret", ["0" * 64, NO_SECRET], ids=["wrong-secret", "no-secret"])
def test_a_stranger_that_says_hello_as_every_rank_and_the_leader_changes_nothing(
        monkeypatch, caplog, secret):
    seen, stranger = _probed(monkeypatch, secret)
    with caplog.at_level("DEBUG", logger="harness.world.server"):
        result = run_world(TARGET, topology="2x2", timeout=20)
    assert seen and stranger[1] == 0, "the stranger could not even send its frames"
    _unheard(result, stranger[0])
    refused = [r.getMessage() for r in caplog.records if "refused a connection" in r.getMessage()]
    assert len(refused) == 5 and all("without the world's secret" in m for m in refused)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can be another user")
def test_another_users_process_is_refused_even_with_the_secret(monkeypatch, caplog):
    seen, stranger = _probed(monkeypatch, True, uid=NOBODY)
    with caplog.at_level("DEBUG", logger="harness.world.loop"):
        result = run_world(TARGET, topology="2x2", timeout=20)
    assert seen and stranger[1] == 0, "the stranger could not even send its frames"
    _unheard(result, stranger[0])
    assert any(f"uid {NOBODY}" in r.getMessage() for r in caplog.records)


def test_the_socket_is_a_path_in_a_directory_only_the_harness_user_enters(monkeypatch):
    seen, _ = _probed(monkeypatch, "0" * 64)
    result = run_world(TARGET, topology="2x2", timeout=20, keep_output_dir=True)
    spec = seen["spec"]
    try:
        assert not spec.address.startswith("\0"), "an abstract socket: anyone's to connect to"
        assert os.path.dirname(spec.address).startswith(spec.outdir + os.sep)
        assert stat.S_IMODE(seen["dir"].st_mode) == 0o700
        assert seen["dir"].st_uid == os.geteuid()
        assert stat.S_ISSOCK(seen["sock"].st_mode)
        assert not os.path.exists(os.path.dirname(spec.address)), "the world's end removes it"
        assert [r.outcome for r in result.ranks] == [ERROR] * 4
    finally:
        shutil.rmtree(spec.outdir, ignore_errors=True)


def test_a_world_whose_directory_is_too_deep_for_sun_path_still_hears_its_ranks(
        monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))  # python isolation's world base
    seen, stranger = _probed(monkeypatch, "0" * 64)
    result = run_world(TARGET, topology="2x2", timeout=20, isolation="python")
    assert len(os.fsencode(seen["spec"].address)) > 107
    _unheard(result, stranger[0])
