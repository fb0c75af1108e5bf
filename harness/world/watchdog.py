"""The watchdog's work at a world's deadline: take every live rank's stacks,
say who waits where, then let the leader kill what is left."""

from __future__ import annotations

import os
import re
import selectors
import socket
import time

from harness.history import ranks_phrase
from harness.rank import wire


def collect_stacks(control: dict[int, socket.socket],
                   timeout: float) -> tuple[dict[int, str], dict[int, str]]:
    """Ask every rank's control thread for its stacks; wait at most ``timeout``.
    Returns each rank's stacks and, for a rank still importing, the module's dotted
    name as the rank knows it (``importing_now``)."""
    asked: dict[socket.socket, int] = {}
    for rank, sock in control.items():
        try:
            sock.settimeout(0.2)
            wire.send_frame(sock, {"type": "stacks"})
            asked[sock] = rank
        except OSError:
            continue
    stacks: dict[int, str] = {}
    importing_: dict[int, str] = {}
    end = time.monotonic() + timeout
    selector = selectors.DefaultSelector()  # not select(): a 256-rank world has fds > 1024
    for sock in asked:
        selector.register(sock, selectors.EVENT_READ)
    while asked and time.monotonic() < end:
        ready = [key.fileobj for key, _ in selector.select(max(end - time.monotonic(), 0))]
        for sock in ready:
            selector.unregister(sock)
            rank = asked.pop(sock)
            try:
                sock.settimeout(max(end - time.monotonic(), 0.05))
                header, _ = wire.recv_frame(sock)
                stacks[rank] = str(header.get("stacks", ""))
                module = header.get("importing")
                if isinstance(module, str) and module:
                    importing_[rank] = module
            except (OSError, EOFError, wire.FrameError):
                pass
    selector.close()
    return stacks, importing_


def fallback_stack(outdir: str, name: str, wait: float) -> str | None:
    """The faulthandler dump a rank's C-level timer wrote at the deadline."""
    path = os.path.join(outdir, f"{name}.faulthandler")
    end = time.monotonic() + wait
    while True:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        if text or time.monotonic() >= end:
            return ("(from faulthandler: the rank did not answer)\n" + text) if text else None
        time.sleep(0.02)


def _main_thread(stack: str) -> str:
    return stack.split("\n\n")[-1] if "Thread MainThread" not in stack else \
        stack[stack.index("Thread MainThread"):].split("\nThread ")[0]


def top_frame(stack: str | None) -> str | None:
    """The innermost ``File ..., line N, in f`` of a rank's main thread."""
    if not stack:
        return None
    main = _main_thread(stack)
    frames = [ln.strip() for ln in main.splitlines() if ln.strip().startswith("File ")]
    if not frames:
        return None
    m = re.match(r'File "(.*)", line (\d+), in (.*)', frames[-1])
    return f"{os.path.basename(m.group(1))}:{m.group(2)} in {m.group(3)}" if m else frames[-1]


_FRAME = re.compile(r'File "(.*?)", line \d+,? in (.*)')
_IMPORT = re.compile(r"(?:import|from)\s+([A-Za-z_][\w.]*)")


def importing(stack: str | None) -> str | None:
    """The module a rank's main thread is still importing, or None: the innermost
    ``import X`` line that entered importlib, else the file of the innermost
    module body that importlib runs (a faulthandler dump has no source lines)."""
    if not stack or "importlib._bootstrap" not in stack:
        return None
    frames: list[tuple[str, str, str]] = []  # file, function, source line
    for line in _main_thread(stack).splitlines():
        m = _FRAME.search(line)
        if m:
            frames.append((m.group(1), m.group(2).strip(), ""))
        elif frames and line.strip() and not frames[-1][2]:
            frames[-1] = (*frames[-1][:2], line.strip())
    if "most recent call first" in stack:  # a faulthandler dump: innermost first
        frames.reverse()
    name = None
    for i, (file, _, _) in enumerate(frames):
        if "importlib._bootstrap" not in file or i == 0:
            continue
        caller = frames[i - 1]
        if "importlib" in caller[0]:
            continue
        m = _IMPORT.match(caller[2])
        if m:
            name = m.group(1)
        else:  # import_module(), __import__, a faulthandler dump: the module body
            body = [f for f in frames[i:] if f[1] == "<module>" and "importlib" not in f[0]]
            if body:
                name = dotted_name(body[0][0])
    return name


def dotted_name(path: str) -> str:
    """A module's dotted name from its file, walking up the packages that hold it
    (``.../torch/utils/__init__.py`` is ``torch.utils``, never ``__init__``)."""
    directory, base = os.path.split(path)
    stem = os.path.splitext(base)[0]
    parts = [] if stem == "__init__" else [stem]
    while directory and os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.insert(0, package)
    return ".".join(parts) or stem


_OWN_WAIT = re.compile(r"(\bsleep|\.wait|\.join|\.get|\.acquire|\bselect|\.poll|\.recv)\(")


def own_wait(stack: str | None) -> str | None:
    """The line of the target's own code its main thread waits on (``time.sleep(0.2)``,
    ``event.wait(30)``), when its innermost frame is such a call, else None."""
    if not stack:
        return None
    lines = [ln.strip() for ln in _main_thread(stack).splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[-2].startswith("File ") or lines[-1].startswith("File "):
        return None
    return lines[-1] if _OWN_WAIT.search(lines[-1]) else None


def hang_report(blocked: list[str], running: dict[int, str | None], exited: dict[int, str],
                blocked_ranks: set[int], importing: dict[int, str] | None = None,
                waits: dict[int, str] | None = None, held: bool = False,
                wakes: dict[int, float] | None = None) -> str:
    """``rank 0 exited with SIGKILL; ranks 1-7 wait in rendezvous 'config_save' ...``;
    a rank whose stack is inside an import is said to be still importing, not hung, and
    one in a wait of its own (a poll loop's sleep) shows the line it waits on. ``held``:
    the ranks that run held the world's clock (the wall-clock guard ended the world);
    ``wakes``: when a rank waiting in its own code is next due, on the world's clock."""
    parts = list(blocked)
    by_module: dict[str, list[int]] = {}
    for rank, module in (importing or {}).items():
        if rank not in blocked_ranks and rank in running:
            by_module.setdefault(module, []).append(rank)
    for module, ranks in sorted(by_module.items(), key=lambda kv: min(kv[1])):
        were = "were" if len(ranks) > 1 else "was"
        parts.append(f"{ranks_phrase(ranks)} {were} still importing `{module}`: preload it "
                     "(or give its import longer)")
    by_place: dict[tuple[str, str | None], list[int]] = {}
    for rank, frame in running.items():
        if rank not in blocked_ranks and rank not in (importing or {}):
            key = (frame or "an unknown place", (waits or {}).get(rank))
            by_place.setdefault(key, []).append(rank)
    for (place, wait), ranks in sorted(by_place.items(), key=lambda kv: min(kv[1])):
        if place.startswith("the fault plan"):
            parts.append(f"{ranks_phrase(ranks)} held by {place}")
        elif wait is not None:  # a wait of its own (a poll loop's sleep): its own timeout rules
            due = [wakes[r] for r in ranks if r in (wakes or {})]
            parts.append(f"{ranks_phrase(ranks)} {'waits' if len(ranks) == 1 else 'wait'} in "
                         f"{'its' if len(ranks) == 1 else 'their'} own code at {place}: `{wait}`"
                         + (f", next due at t={min(due):.1f} s" if due else ""))
        elif held:
            parts.append(f"{ranks_phrase(ranks)} held the world's clock, still running at {place}")
        else:
            parts.append(f"{ranks_phrase(ranks)} still running outside any collective, "
                         f"in {place}")
    by_how: dict[str, list[int]] = {}
    for rank, how in exited.items():
        by_how.setdefault(how, []).append(rank)
    ended = [f"{ranks_phrase(ranks)} {how}"
             for how, ranks in sorted(by_how.items(), key=lambda kv: min(kv[1]))]
    # what ended badly first: usually the cause the others wait for, and what a one-line
    # report cut to a terminal's width must still show
    parts = [p for p in ended if not p.endswith(" returned")] + parts + \
        [p for p in ended if p.endswith(" returned")]
    return "; ".join(parts) if parts else "the deadline passed"
