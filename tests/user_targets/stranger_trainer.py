"""Pre-emption-safe data-parallel trainer. Rank 0 writes ckpt-<step>.bin to the shared dir:
a JSON header line (step, seed, len, sha256, state digest) + torch.save payload, via temp
file + os.replace; truncated or foreign files fail validation and are skipped on resume."""
import hashlib
import io
import json
import os
import re
import signal

import torch
import torch_xla.core.xla_model as xm

IN_DIM, HIDDEN, BATCH, LR = 8, 16, 32, 1e-2
_CKPT_RE = re.compile(r"^ckpt-(\d{8})\.bin$")


def _fresh(seed):
    """Model and optimizer with initial weights derived only from `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed % (2 ** 62))
        model = torch.nn.Sequential(torch.nn.Linear(IN_DIM, HIDDEN), torch.nn.Tanh(),
                                    torch.nn.Linear(HIDDEN, 1))
    return model, torch.optim.Adam(model.parameters(), lr=LR)


def _batch(seed, rank, step):
    """Rank `rank`'s batch at `step`: a pure function of (seed, rank, step)."""
    g = torch.Generator().manual_seed(((seed * 1_000_003 + step) * 65_537 + rank) % (2 ** 62))
    teacher = torch.randn(IN_DIM, 1, generator=torch.Generator().manual_seed((seed + 7919) % (2 ** 62)))
    x = torch.randn(BATCH, IN_DIM, generator=g)
    return x, torch.sin(x @ teacher) + 0.05 * torch.randn(BATCH, 1, generator=g)


def _digest(model, opt):
    """sha256 over weights and optimizer state, in a fixed order."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(f"{name}={t.detach().cpu().flatten().tolist()!r};".encode())
    state = opt.state_dict()["state"]
    for idx in sorted(state):
        for key in sorted(state[idx]):
            v = state[idx][key]
            v = v.detach().cpu().flatten().tolist() if torch.is_tensor(v) else v
            h.update(f"{idx}.{key}={v!r};".encode())
    return h.hexdigest()


def _allmax(value):
    t = torch.tensor([float(value)])
    out = xm.all_reduce(xm.REDUCE_MAX, t)
    return (t if out is None else out).item()


def _path(d, step):
    return os.path.join(d, f"ckpt-{step:08d}.bin")


def _list_steps(d):
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in map(_CKPT_RE.match, names) if m)


def _save(d, step, seed, model, opt):
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
    blob = buf.getvalue()
    head = json.dumps({"step": step, "seed": seed, "len": len(blob),
                       "sha256": hashlib.sha256(blob).hexdigest(), "digest": _digest(model, opt)})
    final = _path(d, step)
    tmp = f"{final}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(head.encode() + b"\n" + blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    for old in [s for s in _list_steps(d) if s < step][:-1]:  # keep this one and the one before
        try:
            os.remove(_path(d, old))
        except OSError:
            pass


def _load(d, step, seed):
    """(model, opt, digest) from ckpt `step`, or None if it is missing/corrupt/foreign."""
    try:
        with open(_path(d, step), "rb") as f:
            head, blob = f.read().split(b"\n", 1)
        meta = json.loads(head)
        if (meta["step"], meta["seed"], meta["len"]) != (step, seed, len(blob)) \
                or hashlib.sha256(blob).hexdigest() != meta["sha256"]:
            return None
        payload = torch.load(io.BytesIO(blob), map_location="cpu")
        model, opt = _fresh(seed)
        model.load_state_dict(payload["model"])
        opt.load_state_dict(payload["opt"])
        digest = _digest(model, opt)
        return (model, opt, digest) if digest == meta["digest"] else None
    except Exception:
        return None


def _resume(d, seed, steps):
    """Every rank proposes its newest loadable ckpt; all take the minimum proposal and
    keep it only if every rank loaded it, else retry below it. Same step on all ranks."""
    ceiling = steps
    while True:
        mine = 0
        for s in reversed([s for s in _list_steps(d) if s <= ceiling]):
            if _load(d, s, seed) is not None:
                mine = s
                break
        pick = int(-_allmax(-mine))
        if pick <= 0:
            model, opt = _fresh(seed)
            return None, model, opt, None
        got = _load(d, pick, seed)
        if _allmax(0 if got is not None else 1) == 0:
            return (pick,) + got
        ceiling = pick - 1


def train(inputs):
    d = inputs.get("checkpoint_dir", "/mnt/checkpoints/run")
    steps, every = int(inputs.get("steps", 12)), max(1, int(inputs.get("save_every", 4)))
    seed = int(inputs.get("seed", 0))
    rank, master = xm.get_ordinal(), xm.is_master_ordinal(local=False)
    os.makedirs(d, exist_ok=True)

    notices = [0]  # SIGTERM count; the handler only records, the loop acts at a step boundary

    def _on_sigterm(signum, frame):
        notices[0] += 1

    try:
        prev = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: cannot install a handler
        prev = None
    try:
        resumed_from, model, opt, resumed_state = _resume(d, seed, steps)
        step, states, handled, loss_fn = resumed_from or 0, {}, 0, torch.nn.MSELoss()
        while step < steps:
            step += 1
            x, y = _batch(seed, rank, step)
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            xm.optimizer_step(opt, barrier=True)  # all-reduces (averages) gradients
            states[str(step)] = _digest(model, opt)
            seen = notices[0]
            # any host noticed -> every rank agrees to save now (only some hosts get SIGTERM)
            term = _allmax(1 if seen > handled else 0) > 0
            if step % every == 0 or term:
                if master:
                    _save(d, step, seed, model, opt)
                handled = seen
        return {"resumed_from": resumed_from, "resumed_state": resumed_state,
                "states": states, "step": step}
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
