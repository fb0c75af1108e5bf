"""The environment a TPU VM gives a rank, and the seeded generators every rank shares."""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

from harness.rank.spec import WorldSpec
from harness.vocabulary import MAX_SEED

_HARNESS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: where the fake torch_xla is: installed beside the package, or in a checkout
_SHIM_CANDIDATES = (
    os.path.join(_HARNESS_DIR, "_shims"),
    os.path.join(os.path.dirname(_HARNESS_DIR), "shims"),
)


def shim_root() -> str:
    """The directory that holds the fake ``torch_xla`` package."""
    for path in _SHIM_CANDIDATES:
        if os.path.isfile(os.path.join(path, "torch_xla", "__init__.py")):
            return path
    raise RuntimeError(f"the torch_xla shim is missing: looked in {', '.join(_SHIM_CANDIDATES)}")


#: The world whose environment this process holds whole, as its leader set it for the units
#: it forks (``enter_world_environment``): a unit then sets only its own variables.
_set_by_leader: str | None = None


def enter_world_environment(spec: WorldSpec) -> None:
    """In a world's leader: the environment every unit of the world starts from."""
    global _set_by_leader
    enter_environment(spec, {})
    _set_by_leader = spec.world_id


def enter_environment(spec: WorldSpec, env: dict[str, str]) -> None:
    """The unit's environment: the world's (``spec.base_env``) with the unit's ``env``."""
    global _set_by_leader
    own = {**env, "HARNESS_PROFILE": spec.profile, "HARNESS_WORLD_ID": spec.world_id}
    if _set_by_leader == spec.world_id:  # the world's already: only what is the unit's own
        _set_by_leader = None  # (a unit forked from this one, a launcher's, sets it whole)
        environ = os.environ
        for key, value in own.items():
            if environ.get(key) != value:
                environ[key] = value
    else:
        set_environment({**spec.base_env, **own})
    own_hostname(own.get("HOSTNAME"))
    import posix
    posix.chdir(spec.cwd)  # the real one: a launcher forking us may have a view installed
    if spec.shim_root not in sys.path[:1]:
        sys.path.insert(0, spec.shim_root)
    from harness.rank import warm

    warm.hand_out(spec.shim_root)  # the shim's modules, as the fork server executed them
    # The fork server dropped them once for all its ranks (a scan of every module name
    # touches, and so copies, pages of the inherited heap); a submodule is only ever
    # imported after its package, so without the package there is nothing to drop.
    if "torch_xla" in sys.modules:
        forget_foreign_torch_xla(spec.shim_root)


def own_hostname(name: str | None) -> None:
    """Every host of a TPU slice has its own name (``t1v-n-...-w-3``), and code asks for it
    (``socket.gethostname()`` to tell workers apart, in a log line). Under kernel isolation
    the unit is on a host of that name already (``namespaces.enter``); otherwise Python's
    ways of asking say it (``socket.gethostname``, ``os.uname``, ``platform``), though a
    subprocess or C code still sees the machine's."""
    import socket

    if not name:
        return
    platform = sys.modules.get("platform")
    if platform is not None:  # what the fork server's imports asked: the machine's name
        platform._uname_cache = None  # type: ignore[attr-defined]
    if socket.gethostname() == name:
        return
    machine_uname = os.uname

    def uname() -> os.uname_result:
        real = machine_uname()
        return os.uname_result((real.sysname, name, real.release, real.version, real.machine))

    socket.gethostname = lambda: name  # type: ignore[assignment]
    os.uname = uname  # type: ignore[assignment]


def set_environment(wanted: dict[str, str]) -> None:
    """``os.environ`` (and the C library's) becomes ``wanted``, changing only what differs:
    the environment inherited from the fork server is mostly the world's already, and each
    variable removed or set again frees or makes objects on pages the fork shares (a copy of
    each page for the rank) and reallocates the C library's array."""
    environ = os.environ
    for key in [k for k in environ if k not in wanted]:
        del environ[key]
    for key, value in wanted.items():
        if environ.get(key) != value:
            environ[key] = value


def forget_foreign_torch_xla(shim_root: str) -> None:
    """Drop any ``torch_xla`` module that is not the shim's, so the next import finds the shim.

    Only another package's modules go (a real torch_xla a preloaded library
    imported in the fork server, where the shim is not on ``sys.path``). The
    shim's own modules stay: in exec mode a launcher that imported them forks
    its ranks, and, as a real spawn's worker imports torch_xla once, a rank
    must keep exactly one copy (a second would run ``torch_xla/__init__`` again
    and register the ``xla`` backend twice).
    """
    root = os.path.join(os.path.abspath(shim_root), "")
    for name in [m for m in sys.modules if m == "torch_xla" or m.startswith("torch_xla.")]:
        path = getattr(sys.modules[name], "__file__", None)
        if path is None or not os.path.abspath(path).startswith(root):
            del sys.modules[name]


def seed_temp_names(rank: int, life: int, round_: int = 0) -> None:
    """``tempfile``'s names drawn from a generator seeded by the rank and its life.

    Real names are random per process; here they are the same in every run of a
    world, so that a run is reproducible to its paths (a report names the same
    ``tmpk3j9x2ab.tmp`` every time) and a staging file learned from the target's
    fault-free run (written, then renamed onto the handoff) is the one its cells
    write too. Ranks, lives and spawn rounds draw distinct names, as distinct
    processes do.
    """
    from harness.imports import when_imported

    def seed(tempfile: Any) -> None:
        names = getattr(tempfile, "_get_candidate_names", None)
        if names is not None:  # private since Python 2, still there: else left random
            key = f"{rank}:{life}" + (f":{round_}" if round_ else "")  # round 0: as before
            names().rng.seed(f"harness-tempfile:{key}")

    when_imported("tempfile", seed)


def process_seed(seed: int, key: str) -> int:
    """The seed of one process's generators: drawn from the world's ``seed`` and the
    process's ``key`` (its rank and life, or its host), so each differs and a run replays."""
    digest = hashlib.sha256(f"harness-process:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # below 2**63: torch takes it as it is


def seed_generators(seed: int, key: str) -> None:
    """``random``, numpy's global generator, torch's default one and the entropy numpy's
    unseeded generators draw (``np.random.default_rng()``) seeded for this process alone.

    On a pod every rank is a fresh process (``xmp.spawn`` starts them with ``spawn``; each
    host is a VM of its own) whose generators start from fresh entropy: a loader that
    draws from them unseeded picks different examples on every rank. Forked ranks would
    share their parent's state and hide that; so each process's come from the world's
    seed and its own ``key`` (``rank-3``, ``rank-3:life-1``, ``host-0``), as distinct as
    fresh ones and the same in every run of the seed. Only ``random.Random()``, which
    reads the operating system's entropy in C, stays unreplayable. ``divergent-rng``
    still moves the ranks it selects onto another seed.
    """
    import random

    from harness.imports import when_imported

    mine = process_seed(seed, key)
    random.seed(mine)

    def seed_numpy(numpy_random: Any) -> None:
        numpy_random.seed(mine % (MAX_SEED + 1))  # numpy takes 32 bits
        bit_generator = sys.modules.get("numpy.random.bit_generator")
        if bit_generator is not None and hasattr(bit_generator, "randbits"):
            bit_generator.randbits = random.Random(f"harness-entropy:{mine}").getrandbits

    when_imported("numpy.random", seed_numpy)
    when_imported("torch", lambda torch: seed_torch(torch, mine))


#: The accelerator modules ``torch.manual_seed`` seeds besides the CPU generator.
_ACCELERATORS = ("cuda", "xpu", "mps", "mtia")


def seed_torch(torch: Any, seed: int) -> None:
    """``torch.manual_seed(seed)``, without what it queues for accelerators the machine lacks.

    For a device that is not initialised, torch queues the seeding until its lazy
    initialisation, with the formatted stack of the call (every frame's source read
    through the rank's view): three of them, most of a rank's start-up on a CPU-only
    machine. A device that is not available can never initialise, so its queue is
    never run: skipping it leaves every generator the target can reach as
    ``torch.manual_seed`` would. With any accelerator available, torch does it all.
    """
    try:
        lacking = all(not getattr(torch, name).is_available() for name in _ACCELERATORS)
        generator = torch.default_generator
        custom = torch.random._seed_custom_device
    except AttributeError:  # another torch than the one this was written against
        lacking = False
    if not lacking:
        torch.manual_seed(seed)
        return
    custom(seed)  # a privateuse1 backend, as torch.manual_seed seeds it
    generator.manual_seed(seed)
