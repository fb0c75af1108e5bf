"""Reading a target's source in the harness: one parse at a time, once per version."""

from __future__ import annotations

import ast
import os
import threading
import time

import pytest

from harness import source
from harness.world.pool import imports_of


def test_parses_never_overlap_across_cell_threads(tmp_path, monkeypatch):
    """CPython 3.11 can fail a parse with ``SystemError: AST constructor recursion depth
    mismatch`` when two threads build syntax trees at once (python/cpython#106905); it
    failed a crash-state run under load. Every parse the harness makes is serialised."""
    real_parse, inside, most = ast.parse, [0], [0]

    def slow_parse(*args, **kwargs):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.01)  # leaves the GIL: an unserialised parse in another thread starts now
        try:
            return real_parse(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    paths = []
    for i in range(8):
        path = tmp_path / f"target_{i}.py"
        path.write_text(f"import json\nimport yaml as y{i}\n")
        paths.append(str(path))
    found: list[set[str]] = []
    threads = [threading.Thread(target=lambda p=p: found.append(imports_of(p))) for p in paths]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == 1
    assert found == [{"json", "yaml"}] * 8


def test_a_file_is_parsed_again_once_it_changes(tmp_path):
    path = tmp_path / "sync.py"
    path.write_text("import json\n")
    first = source.parse(str(path))
    assert source.parse(str(path)) is first  # unchanged: the tree already built
    path.write_text("import json, yaml\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert imports_of(str(path)) == {"json", "yaml"}


def test_a_fifo_is_refused_without_being_opened(tmp_path):
    fifo = tmp_path / "sync.py"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="sync.py: a Python source file must be a regular file"):
        source.parse(str(fifo))  # an open() would block until a writer came
    assert imports_of(str(fifo)) == set()
