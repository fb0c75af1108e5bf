"""The docs' code samples run, so a page that lies fails (CONTRIBUTING.md, "Documentation").

Every ``docs/**/*.md`` page and the README is one test, run in a fresh directory of its own.
Its fenced blocks are read in document order: a block with ``title="NAME"`` is written to
NAME; a ``console`` block is a session whose ``$ `` commands run and whose printed lines must
show up in order; every other ``python``, ``yaml`` and ``toml`` block must compile or load. A
block right after ``<!-- docs-test: skip -->`` (or ``<!-- docs-test: skip: REASON -->``) is
left alone. The parsing is the pure functions at the top; their own tests are at the bottom.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from support import REPO, TESTS, tomllib

#: A command's bound in wall-clock seconds, so that a stuck page fails instead of hanging.
TIMEOUT = 300
#: How much of a failing command's output a failure shows.
TAIL = 60


class DocsError(Exception):
    """A page that does not say what happens, or cannot be read: the message names the page
    and the line."""


@dataclass(frozen=True)
class Block:
    """A fenced code block: ``line`` is its opening fence's line in the page (from 1)."""

    line: int
    lang: str
    title: str | None
    text: str
    skip: str | None = None  # the skip comment's reason ("" without one); None: not skipped


@dataclass(frozen=True)
class Command:
    """One ``$ `` command of a console block and what it prints (``...`` lines left out)."""

    line: int
    text: str
    expected: tuple[str, ...]
    exit: int = 0


FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")
LIST_ITEM = re.compile(r"^(?P<indent> *)(?P<marker>[-*+]|\d{1,9}[.)])(?P<space> {1,4}|$)")
DOCS_TEST = re.compile(r"^<!--\s*docs-test\b")
SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\s*(?::\s*(?P<reason>.*?))?\s*-->$")
TITLE = re.compile(r"""(?:^|\s)title=(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>\S+))""")
EXIT = re.compile(r"^\[exit (?P<code>\d+)\]$")
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: Language names a block's info string may use for the three that are checked.
LANGS = {"py": "python", "python3": "python", "yml": "yaml"}
#: The leading words a command's interpreter takes the place of (``$PYTHON`` is sys.executable).
LEADING = {"harness": '"$PYTHON" -m harness', "python": '"$PYTHON"', "python3": '"$PYTHON"',
           "pytest": '"$PYTHON" -m pytest'}
#: Commands that set up an environment: the page runs in the one installed already.
SETUP = ("pip ", "pip3 ", "python -m pip ", "python3 -m pip ", "python -m venv", "python3 -m venv",
         ". ", "source ", "git clone")


def fenced_blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order. A fence is three or more backticks,
    indented under a list item or not; a 4-space indented code block is not one, and neither
    is a fence inside it."""
    blocks: list[Block] = []
    lists: list[int] = []  # the content columns of the list items open here, innermost last
    skip: tuple[int, str] | None = None  # a skip comment waiting for its block
    after_text = False  # the line before was a non-blank line outside a fence
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line, number = lines[i], i + 1
        i += 1
        if not line.strip():
            after_text = False
            continue
        indent = len(line) - len(line.lstrip(" "))
        fence = FENCE.match(line)
        item = LIST_ITEM.match(line)
        # a line left of an item's content ends the item, unless it only continues a paragraph
        while lists and indent < lists[-1] and (fence or item or not after_text):
            lists.pop()
        after_text = True
        if item:
            lists.append(indent + len(item["marker"]) + max(len(item["space"]), 1))
        if fence is None or indent - (lists[-1] if lists else 0) >= 4:
            stripped = line.strip()
            if skip is not None:
                raise DocsError(f"{page}:{skip[0]}: the docs-test skip comment is not followed by "
                                f"a fenced code block (line {number} is: {stripped!r})")
            if DOCS_TEST.match(stripped):
                found = SKIP.match(stripped)
                if found is None:
                    raise DocsError(f"{page}:{number}: not a docs-test comment: {stripped!r} (write "
                                    "<!-- docs-test: skip --> or <!-- docs-test: skip: REASON -->)")
                skip = (number, found["reason"] or "")
            continue
        ticks, info = fence["fence"], fence["info"].strip()
        body: list[str] = []
        while i < len(lines):
            inner = lines[i]
            i += 1
            if inner.strip().startswith(ticks) and not inner.strip().strip("`"):
                break
            cut = len(inner) - len(inner.lstrip(" "))
            body.append(inner[min(cut, indent):])
        else:
            raise DocsError(f"{page}:{number}: the {ticks} fence opened here is never closed")
        words = info.split()
        lang = words[0].lower() if words else ""
        title = TITLE.search(info[len(words[0]):] if words else "")
        blocks.append(Block(number, LANGS.get(lang, lang),
                            title and (title["dq"] or title["sq"] or title["bare"]),
                            "".join(f"{b}\n" for b in body), None if skip is None else skip[1]))
        skip = None
        after_text = False
    if skip is not None:
        raise DocsError(f"{page}:{skip[0]}: the docs-test skip comment is not followed by a "
                        "fenced code block (the page ends)")
    return blocks


def session(block: Block, page: str) -> list[Command]:
    """The commands of a ``console`` block: each ``$ `` line (continued while it ends in
    `` \\``), then what it prints up to the next one; ``[exit N]`` last is its exit status."""
    commands: list[Command] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        number = block.line + 1 + i
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            if line.strip():
                raise DocsError(f"{page}:{number}: a console block's output before its first "
                                f"command ({line.strip()!r}): a command starts with '$ ' (a block "
                                "that only shows output is ```text)")
            continue
        text = line[2:].strip()
        while text.endswith(" \\") or text == "\\":
            if i == len(lines):
                raise DocsError(f"{page}:{number}: the command ends in a continuation ' \\' "
                                "but the block ends")
            text = f"{text[:-1].rstrip()} {lines[i].strip()}".strip()
            i += 1
        if not text:
            raise DocsError(f"{page}:{number}: an empty command ('$' and nothing after it)")
        output: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i].strip())
            i += 1
        shown = [o for o in output if o]
        code = EXIT.match(shown[-1]) if shown else None
        if code:
            shown.pop()
        commands.append(Command(number, text, tuple(o for o in shown if o != "..."),
                                int(code["code"]) if code else 0))
    return commands


def shell_command(text: str) -> str | None:
    """What bash runs for a command: its leading ``harness``, ``python``, ``python3`` or
    ``pytest`` is this interpreter's; None for a command that sets up an environment."""
    if text.startswith(SETUP):
        return None
    word, _, rest = text.partition(" ")
    return f"{LEADING[word]} {rest}".rstrip() if word in LEADING else text


def normal(line: str) -> str:
    """A line as compared: colours stripped, runs of whitespace one space, none at the ends."""
    return " ".join(ANSI.sub("", line).split())


def _holds(line: str, want: str) -> bool:
    """``want`` occurs in ``line``, a ``…`` in it standing for whatever the page cannot know
    (an absolute path's start: ``--target …/sync.py:fn``), as a cut line ends in one."""
    at = 0
    for part in want.split("…"):
        found = line.find(part, at)
        if found < 0:
            return False
        at = found + len(part)
    return True


def missing(expected: tuple[str, ...], output: str) -> tuple[str, int] | None:
    """The first expected line that does not occur in the output in order (each in a later
    output line than the one before it), with the number of output lines already matched;
    None when all do."""
    lines = [normal(o) for o in output.splitlines()]
    at = 0
    for want in expected:
        found = next((k for k in range(at, len(lines)) if _holds(lines[k], normal(want))), None)
        if found is None:
            return want, at
        at = found + 1
    return None


def check_syntax(block: Block, page: str) -> None:
    """A python block compiles, a yaml or toml one loads; other languages are not checked."""
    where = f"{page}:{block.line}: the {block.lang} block"
    try:
        if block.lang == "python":
            ast.parse(block.text, filename=f"{page}:{block.line}")
        elif block.lang == "yaml":
            yaml.safe_load(block.text)
        elif block.lang == "toml":
            tomllib.loads(block.text)
    except SyntaxError as e:
        raise DocsError(f"{where} does not compile (line {block.line + (e.lineno or 0)}): "
                        f"{e.msg}\n    {(e.text or '').rstrip()}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {block.line + 1 + mark.line})" if mark is not None else ""
        raise DocsError(f"{where} does not load{at}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        found = re.search(r"at line (\d+)", str(e))
        at = f" (line {block.line + int(found[1])})" if found else ""
        raise DocsError(f"{where} does not load{at}: {e}") from None


def page_env(root: Path) -> dict[str, str]:
    """The environment a page's commands run in: this one's, its discovery cache inside the
    page's directory, no colours, 100 columns, this interpreter's scripts first on PATH (for a
    ``harness`` that is not a command's first word), without pytest's variables or the test
    suite's own directory on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST_") and k not in ("FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE")}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(TESTS)]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    env.update(PYTHON=sys.executable, HARNESS_CACHE_DIR=str(root / ".harness_cache"),
               NO_COLOR="1", COLUMNS="100", TERM="dumb",
               PATH=os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")]))
    return env


def inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def run_command(script: str, cwd: Path, env: dict[str, str],
                timeout: float) -> tuple[int | None, str, Path]:
    """``bash -c SCRIPT`` in ``cwd``: its exit status (None: timed out, and killed), its
    stdout and stderr together, and the directory it ended in (``cd`` lasts, as in a shell)."""
    with tempfile.TemporaryDirectory(prefix="docs-test-") as scratch:
        out, pwd = Path(scratch, "output"), Path(scratch, "pwd")
        traced = f"trap 'pwd > \"$DOCS_TEST_PWD\"' EXIT\n{script}"
        with out.open("wb") as sink:
            proc = subprocess.Popen(["bash", "-c", traced], cwd=cwd, env={**env, "DOCS_TEST_PWD": str(pwd)},
                                    stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the command and its children
                proc.wait()
                code = None
        ended = Path(pwd.read_text().strip()) if pwd.exists() and pwd.read_text().strip() else cwd
        return code, out.read_bytes().decode("utf-8", "replace"), ended


def failure(page: str, block: Block, command: Command, what: str, output: str) -> DocsError:
    tail = ANSI.sub("", output).splitlines()[-TAIL:]
    shown = "\n".join(f"    {t}" for t in tail) if tail else "    (nothing)"
    return DocsError(f"{page}:{command.line}: $ {command.text}\n(the console block at line "
                     f"{block.line})\n{what}\nthe last {TAIL} lines of its output:\n{shown}")


def run_page(page: Path, name: str, root: Path, timeout: float = TIMEOUT) -> None:
    """Do what the page says in ``root``, a fresh directory, and check that it happens;
    DocsError names the page, the line and what differs."""
    blocks = fenced_blocks(page.read_text(encoding="utf-8"), name)
    steps: list[tuple[Block, list[Command] | None]] = []
    for block in blocks:  # everything read and compiled first: a typo fails before any run
        if block.skip is not None:
            continue
        if block.title:
            steps.append((block, None))
        elif block.lang == "console":
            steps.append((block, session(block, name)))
        else:
            check_syntax(block, name)
    env = page_env(root)
    cwd = root
    for block, commands in steps:
        if commands is None:
            target = cwd / block.title
            if not inside(root, target):
                raise DocsError(f"{name}:{block.line}: title={block.title!r} is outside the "
                                "page's directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
            continue
        for command in commands:
            script = shell_command(command.text)
            if script is None:
                continue
            code, output, ended = run_command(script, cwd, env, timeout)
            if code is None:
                raise failure(name, block, command, f"timed out after {timeout:g} s", output)
            if not inside(root, ended):
                raise failure(name, block, command, f"it left the page's directory for {ended}",
                              output)
            cwd = ended
            lost = missing(command.expected, output)
            if lost is not None:
                want, at = lost
                after = f" after the output's line {at}" if at else ""
                raise failure(name, block, command, f"expected line not found{after}: {want!r}"
                              f" (exit status {code})", output)
            if code != command.exit:
                raise failure(name, block, command, f"exit status {code}, expected "
                              f"{command.exit}" + ("" if command.exit else
                                                   " (a last line '[exit N]' expects N)"), output)


PAGES = sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("docs/**/*.md")) + ["README.md"]


@pytest.mark.parametrize("page", PAGES, ids=PAGES)
def test_page(page: str, tmp_path: Path) -> None:
    try:
        run_page(REPO / page, page, tmp_path)
    except DocsError as e:
        problem = str(e)
    else:
        return
    pytest.fail(problem, pytrace=False)  # outside the except: the message alone, no chained trace


# The parser and the runner themselves, on pages written here.

def run(tmp_path: Path, text: str, timeout: float = TIMEOUT) -> Path:
    """Run a scratch page in a fresh directory under ``tmp_path`` (``run-0`` first, then
    ``run-1``, ...); that directory."""
    page = tmp_path / "page.md"
    page.write_text(text)
    root = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    root.mkdir()
    run_page(page, "page.md", root, timeout)
    return root


SYNC_PAGE = '''\
# Sync

Write the function:

```python title="sync.py"
def sync(config):
    return dict(config, synced=True)


print(sync({"lr": 0.1}))
print("done,    all  ranks")
```

Run it:

```console
$ python sync.py
{'lr': 0.1, 'synced': True}
done, all ranks
```
'''


def test_the_pages_are_found() -> None:
    assert "README.md" in PAGES and "docs/tutorial/first-run.md" in PAGES
    assert "docs/index.md" in PAGES and len(PAGES) > 20


def test_a_title_block_becomes_a_file_and_a_session_runs_it(tmp_path: Path) -> None:
    (block, console) = fenced_blocks(SYNC_PAGE, "page.md")
    assert (block.line, block.lang, block.title) == (5, "python", "sync.py")
    assert session(console, "page.md") == [
        Command(17, "python sync.py", ("{'lr': 0.1, 'synced': True}", "done, all ranks"))]
    root = run(tmp_path, SYNC_PAGE)
    assert (root / "sync.py").read_text() == block.text
    assert block.text.startswith("def sync(config):\n") and block.text.endswith('ranks")\n')


def test_a_page_that_lies_fails_naming_the_page_line_command_and_line(tmp_path: Path) -> None:
    lying = SYNC_PAGE.replace("'synced': True", "'synced': False")
    with pytest.raises(DocsError) as e:
        run(tmp_path, lying)
    assert str(e.value).startswith("page.md:17: $ python sync.py\n(the console block at line 16)\n"
                                   "expected line not found: \"{'lr': 0.1, 'synced': False}\" "
                                   "(exit status 0)\nthe last 60 lines of its output:\n"
                                   "    {'lr': 0.1, 'synced': True}\n")


def test_expected_lines_are_found_in_order(tmp_path: Path) -> None:
    swapped = SYNC_PAGE.replace("{'lr': 0.1, 'synced': True}\ndone, all ranks",
                                "done, all ranks\n{'lr': 0.1, 'synced': True}")
    with pytest.raises(DocsError, match=r"not found after the output's line 2: \"\{'lr'"):
        run(tmp_path, swapped)


def test_exit_n_is_honoured(tmp_path: Path) -> None:
    page = ("```console\n$ harness --no-such-option\nError: No such option '--no-such-option'.\n"
            "[exit 2]\n```\n")
    (command,) = session(fenced_blocks(page, "p.md")[0], "p.md")
    assert command.exit == 2 and command.expected == ("Error: No such option '--no-such-option'.",)
    run(tmp_path, page)
    with pytest.raises(DocsError, match=r"page.md:2: \$ harness --no-such-option\n.*\nexit status 2, "
                                        r"expected 0 \(a last line '\[exit N\]' expects N\)"):
        run(tmp_path, page.replace("[exit 2]\n", ""))
    with pytest.raises(DocsError, match="exit status 2, expected 3\n"):
        run(tmp_path, page.replace("[exit 2]", "[exit 3]"))


def test_an_ellipsis_line_matches_nothing(tmp_path: Path) -> None:
    page = "```console\n$ printf 'one\\ntwo\\nthree\\n'\none\n...\nthree\n```\n"
    (command,) = session(fenced_blocks(page, "p.md")[0], "p.md")
    assert command.expected == ("one", "three")
    run(tmp_path, page)
    with pytest.raises(DocsError, match="expected line not found after the output's line 1: 'four'"):
        run(tmp_path, page.replace("...", "four"))


def test_a_skip_comment_skips_the_next_block_only(tmp_path: Path) -> None:
    page = ("<!-- docs-test: skip: needs a TPU -->\n\n```console\n$ exit 7\n```\n\n"
            "<!-- docs-test: skip -->\n```python title=\"never.py\"\nnot python\n```\n\n"
            "```console\n$ ls\n```\n")
    blocks = fenced_blocks(page, "p.md")
    assert [b.skip for b in blocks] == ["needs a TPU", "", None]
    root = run(tmp_path, page)
    assert not (root / "never.py").exists()
    with pytest.raises(DocsError, match=r"page.md:3: \$ exit 7\n.*\nexit status 7, expected 0"):
        run(tmp_path, page.replace("<!-- docs-test: skip: needs a TPU -->\n", ""))


def test_a_skip_comment_must_come_right_before_a_block() -> None:
    with pytest.raises(DocsError, match=r"p.md:1: the docs-test skip comment is not followed by a "
                                        r"fenced code block \(line 3 is: 'Some prose.'\)"):
        fenced_blocks("<!-- docs-test: skip -->\n\nSome prose.\n\n```console\n$ ls\n```\n", "p.md")
    with pytest.raises(DocsError, match=r"p.md:1: .* not followed by a fenced code block \(line 2 is: "
                                        r"'- an item'"):
        fenced_blocks("<!-- docs-test: skip -->\n- an item\n\n  ```console\n  $ ls\n  ```\n", "p.md")
    with pytest.raises(DocsError, match="p.md:2: not a docs-test comment: '<!-- docs-test: skipp -->'"):
        fenced_blocks("\n<!-- docs-test: skipp -->\n```console\n$ ls\n```\n", "p.md")


def test_a_continuation_line_joins(tmp_path: Path) -> None:
    page = "```console\n$ echo one \\\n    two \\\n  three\none two three\n$ echo four\nfour\n```\n"
    assert session(fenced_blocks(page, "p.md")[0], "p.md") == [
        Command(2, "echo one two three", ("one two three",)), Command(6, "echo four", ("four",))]
    run(tmp_path, page)
    with pytest.raises(DocsError, match="p.md:2: the command ends in a continuation"):
        session(fenced_blocks("```console\n$ echo one \\\n```\n", "p.md")[0], "p.md")


def test_a_list_indented_fence_is_read_and_an_indented_code_block_is_not(tmp_path: Path) -> None:
    page = ("1. Write it:\n\n"
            "    ```python title=\"pkg/x.py\"\n    def f():\n        return 1\n    ```\n\n"
            "2. Run it:\n\n"
            "   ```console\n   $ python -c 'import pkg.x; print(pkg.x.f())'\n   1\n   ```\n\n"
            "An indented code block is shown, not run:\n\n"
            "    ```console\n    $ exit 1\n    ```\n")
    blocks = fenced_blocks(page, "p.md")
    assert [(b.line, b.title, b.text) for b in blocks] == [
        (3, "pkg/x.py", "def f():\n    return 1\n"),
        (10, None, "$ python -c 'import pkg.x; print(pkg.x.f())'\n1\n")]
    root = run(tmp_path, page)
    assert (root / "pkg" / "x.py").read_text() == "def f():\n    return 1\n"


def test_python_yaml_and_toml_blocks_must_compile() -> None:
    good = "```python\nx = 1\n```\n```yaml\na: [1, 2]\n```\n```toml\n[a]\nb = 1\n```\n```sh\n(\n```\n"
    for block in fenced_blocks(good, "p.md"):
        check_syntax(block, "p.md")
    with pytest.raises(DocsError, match=r"p.md:2: the python block does not compile \(line 4\): "
                                        r"invalid syntax"):
        check_syntax(fenced_blocks("\n```python\nx = 1\ndef f(:\n```\n", "p.md")[0], "p.md")
    with pytest.raises(DocsError, match=r"p.md:1: the yaml block does not load \(line 3\)"):
        check_syntax(fenced_blocks("```yaml\na: 1\n b: [\n```\n", "p.md")[0], "p.md")
    with pytest.raises(DocsError, match=r"p.md:1: the toml block does not load \(line 2\): Invalid value"):
        check_syntax(fenced_blocks("```toml\na = \n```\n", "p.md")[0], "p.md")


def test_a_broken_page_says_where(tmp_path: Path) -> None:
    with pytest.raises(DocsError, match="p.md:3: the ```` fence opened here is never closed"):
        fenced_blocks("text\n\n````python\nx = 1\n```\n", "p.md")
    with pytest.raises(DocsError, match=r"p.md:2: a console block's output before its first "
                                        r"command \('harness run'\)"):
        session(fenced_blocks("```console\nharness run\n```\n", "p.md")[0], "p.md")
    with pytest.raises(DocsError, match=r"page.md:1: title='../out.py' is outside"):
        run(tmp_path, "```python title=\"../out.py\"\nx = 1\n```\n")


def test_commands_run_as_a_user_types_them(tmp_path: Path) -> None:
    assert shell_command("harness run --seeds 0") == '"$PYTHON" -m harness run --seeds 0'
    assert shell_command("python3 sync.py") == '"$PYTHON" sync.py'
    assert shell_command("pytest -q") == '"$PYTHON" -m pytest -q'
    assert shell_command("harnessy run") == "harnessy run"
    for setup in ("pip install -e '.[test]'", "python -m venv .venv", ". .venv/bin/activate",
                  "source .venv/bin/activate", "git clone https://example.com/h.git"):
        assert shell_command(setup) is None
    page = ("```console\n$ pip install nothing-at-all\nnever printed\n"
            "$ mkdir sub && cd sub\n$ python -c 'import os; print(os.getcwd())'\n"
            f"{tmp_path / 'run-0' / 'sub'}\n"
            "$ harness --help\nUsage: python -m harness [OPTIONS] COMMAND [ARGS]...\n"
            "$ echo \"$HARNESS_CACHE_DIR $NO_COLOR $COLUMNS\"\n"
            f"{tmp_path / 'run-0' / '.harness_cache'} 1 100\n```\n")
    run(tmp_path, page)
    with pytest.raises(DocsError, match=r"page.md:2: \$ cd /\n.*\nit left the page's directory for /\n"):
        run(tmp_path, "```console\n$ cd /\n```\n")


def test_output_is_compared_without_colours_or_extra_spaces() -> None:
    assert missing(("PASS ✓ 3 cells",), "\x1b[32mPASS\x1b[0m  ✓\t 3 cells  \n") is None
    assert missing(("────",), "──────────────\n") is None
    assert missing(("PASS 4",), "PASS 3\n") == ("PASS 4", 0)


def test_a_command_that_hangs_fails_with_what_it_printed(tmp_path: Path) -> None:
    # a bound of its own (half a second) instead of the pages' 300 s
    with pytest.raises(DocsError, match=r"timed out after 0.5 s\n.*\n    started$"):
        run(tmp_path, "```console\n$ echo started; sleep 30\n```\n", timeout=0.5)
