"""One config handoff written every way a team writes a file, read three ways.

Each target is ``<pattern>__<reader>``: rank 0 writes the config with ``<pattern>``
(in place, fsynced, staged and renamed, O_TMPFILE and linked, shutil, torch.save,
np.save, or by a subprocess), and the other ranks read it as ``<reader>`` does
(after a rendezvous, polling with a deadline, polling with none). A fault must mean the
same for every pattern: ``tests/catalog/test_write_patterns.py`` holds the table.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import torch_xla.core.xla_model as xm

DIR = "/tmp/patterns"
CFG = os.path.join(DIR, "cfg.json")
POLL_S = 0.5
DEADLINE_S = 10


def _body(config):
    return json.dumps(config, sort_keys=True).encode()


def _read_json():
    with open(CFG, "rb") as f:
        return json.loads(f.read())


def direct(config):
    with open(CFG, "wb") as f:
        f.write(_body(config))


def fsynced(config):
    with open(CFG, "wb") as f:
        f.write(_body(config))
        f.flush()
        os.fsync(f.fileno())


def staged_replace(config):
    tmp = CFG + ".tmp"
    with open(tmp, "wb") as f:
        f.write(_body(config))
    os.replace(tmp, CFG)


def tempfile_rename(config):
    with tempfile.NamedTemporaryFile(dir=DIR, prefix=".cfg-", delete=False) as f:
        f.write(_body(config))
    os.rename(f.name, CFG)


def tmpfile_link(config):
    fd = os.open(DIR, os.O_TMPFILE | os.O_WRONLY, 0o644)
    try:
        os.write(fd, _body(config))
        os.link(f"/proc/self/fd/{fd}", CFG)
    finally:
        os.close(fd)


def shutil_copy(config):
    private = "/tmp/patterns_rank0/cfg.json"
    os.makedirs(os.path.dirname(private), exist_ok=True)
    with open(private, "wb") as f:
        f.write(_body(config))
    shutil.copy(private, CFG)


def shutil_move(config):
    part = CFG + ".part"
    with open(part, "wb") as f:
        f.write(_body(config))
    shutil.move(part, CFG)


def torch_save(config):
    import torch

    torch.save(config, CFG)


def np_save(config):
    import numpy as np

    with open(CFG, "wb") as f:
        np.save(f, np.frombuffer(_body(config), dtype=np.uint8))


def by_subprocess(config):
    # staged inside the subprocess: the harness sees neither name, only the readers' looks
    code = ("import os, sys; p = sys.argv[1]; open(p + '.w', 'wb').write(sys.argv[2].encode()); "
            "os.replace(p + '.w', p)")
    subprocess.run([sys.executable, "-c", code, CFG, _body(config).decode()], check=True)


def _load(pattern):
    if pattern is torch_save:
        import torch

        return torch.load(CFG)
    if pattern is np_save:
        import numpy as np

        return json.loads(np.load(CFG).tobytes())
    return _read_json()


def _after_rendezvous(pattern, config):
    if xm.get_ordinal() == 0:
        os.makedirs(DIR, exist_ok=True)
        pattern(config)
    xm.rendezvous("config-written")
    return config if xm.get_ordinal() == 0 else _load(pattern)


def _poll(pattern, config, deadline_s):
    if xm.get_ordinal() == 0:
        os.makedirs(DIR, exist_ok=True)
        pattern(config)
        return config
    give_up = None if deadline_s is None else time.monotonic() + deadline_s
    while give_up is None or time.monotonic() < give_up:
        if os.path.exists(CFG):
            try:
                return _load(pattern)
            except (OSError, ValueError, EOFError, RuntimeError):
                pass  # not all there yet: look again
        time.sleep(POLL_S)
    raise TimeoutError(f"rank {xm.get_ordinal()}: no {CFG} after {deadline_s} s")



# The targets, spelled out: the harness finds a target by its name in the file.


def direct__after_rendezvous(inputs):
    return _after_rendezvous(direct, inputs["config"])


def direct__poll_deadline(inputs):
    return _poll(direct, inputs["config"], DEADLINE_S)


def direct__poll_forever(inputs):
    return _poll(direct, inputs["config"], None)


def fsynced__after_rendezvous(inputs):
    return _after_rendezvous(fsynced, inputs["config"])


def fsynced__poll_deadline(inputs):
    return _poll(fsynced, inputs["config"], DEADLINE_S)


def fsynced__poll_forever(inputs):
    return _poll(fsynced, inputs["config"], None)


def staged_replace__after_rendezvous(inputs):
    return _after_rendezvous(staged_replace, inputs["config"])


def staged_replace__poll_deadline(inputs):
    return _poll(staged_replace, inputs["config"], DEADLINE_S)


def staged_replace__poll_forever(inputs):
    return _poll(staged_replace, inputs["config"], None)


def tempfile_rename__after_rendezvous(inputs):
    return _after_rendezvous(tempfile_rename, inputs["config"])


def tempfile_rename__poll_deadline(inputs):
    return _poll(tempfile_rename, inputs["config"], DEADLINE_S)


def tempfile_rename__poll_forever(inputs):
    return _poll(tempfile_rename, inputs["config"], None)


def tmpfile_link__after_rendezvous(inputs):
    return _after_rendezvous(tmpfile_link, inputs["config"])


def tmpfile_link__poll_deadline(inputs):
    return _poll(tmpfile_link, inputs["config"], DEADLINE_S)


def tmpfile_link__poll_forever(inputs):
    return _poll(tmpfile_link, inputs["config"], None)


def shutil_copy__after_rendezvous(inputs):
    return _after_rendezvous(shutil_copy, inputs["config"])


def shutil_copy__poll_deadline(inputs):
    return _poll(shutil_copy, inputs["config"], DEADLINE_S)


def shutil_copy__poll_forever(inputs):
    return _poll(shutil_copy, inputs["config"], None)


def shutil_move__after_rendezvous(inputs):
    return _after_rendezvous(shutil_move, inputs["config"])


def shutil_move__poll_deadline(inputs):
    return _poll(shutil_move, inputs["config"], DEADLINE_S)


def shutil_move__poll_forever(inputs):
    return _poll(shutil_move, inputs["config"], None)


def torch_save__after_rendezvous(inputs):
    return _after_rendezvous(torch_save, inputs["config"])


def torch_save__poll_deadline(inputs):
    return _poll(torch_save, inputs["config"], DEADLINE_S)


def torch_save__poll_forever(inputs):
    return _poll(torch_save, inputs["config"], None)


def np_save__after_rendezvous(inputs):
    return _after_rendezvous(np_save, inputs["config"])


def np_save__poll_deadline(inputs):
    return _poll(np_save, inputs["config"], DEADLINE_S)


def np_save__poll_forever(inputs):
    return _poll(np_save, inputs["config"], None)


def by_subprocess__after_rendezvous(inputs):
    return _after_rendezvous(by_subprocess, inputs["config"])


def by_subprocess__poll_deadline(inputs):
    return _poll(by_subprocess, inputs["config"], DEADLINE_S)


def by_subprocess__poll_forever(inputs):
    return _poll(by_subprocess, inputs["config"], None)

