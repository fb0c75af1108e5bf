"""``harness init``: a starting target, a pytest file and a nightly workflow, in your repository.

Each file is written from ``harness/templates`` with the target's name filled in, never over
a file that is there (``--force`` to replace it); the command then says what to edit and the
two commands to run. The target it writes runs as it is (a correct stand-in, or the
harness's reference worker), so the first run shows the catalog before you wire in your code.
"""

from __future__ import annotations

from pathlib import Path

import click

from harness.vocabulary import DEFAULT_WORKLOAD, ExitCode

#: Per workload: the template, the name it defines, and what to edit in it.
STARTERS = {
    "config-sync": ("config_sync.py", "sync_config",
                    "make sync_config(inputs) call your own config sync and return its config"),
    "data-sharding": ("data_sharding.py", "ShardedLoader",
                      "make ShardedLoader your own loader (a class or function taking data_dir, "
                      "rank, num_replicas, seed, global_batch_size by name)"),
    "checkpoint-resume": ("checkpoint_resume.py", "process_stream",
                          "make process_stream(inputs) run your own worker"),
}
TARGET_FILE = "harness_target.py"
TEST_FILE = "test_harness_catalog.py"
WORKFLOW_FILE = ".github/workflows/harness.yml"


def _template(name: str) -> str:
    return (Path(__file__).resolve().parents[1] / "templates" / name).read_text()


@click.command("init")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--workload", default=DEFAULT_WORKLOAD, show_default=True,
              type=click.Choice(sorted(STARTERS)), help="What your code does.")
@click.option("--force", is_flag=True, default=False, help="Replace files that are there.")
def init_command(directory: str, workload: str, force: bool) -> None:
    """Write a starting target, a pytest file and a nightly workflow for your repository.

    \b
    harness init                          # in your repository's top directory
    harness init --workload data-sharding

    Exit codes: 0 written, 2 a file is there already (nothing is written; --force replaces it).
    """
    root = Path(directory)
    source, name, edit = STARTERS[workload]
    target = f"{TARGET_FILE}:{name}"
    fill = {"target": target, "workload": workload, "test_file": TEST_FILE}
    files = {TARGET_FILE: _template(source).replace("{target}", target),
             TEST_FILE: _template("test_harness_catalog.py").format(**fill),
             WORKFLOW_FILE: _template("harness.yml").format(**fill)}
    there = [rel for rel in files if (root / rel).exists()]
    if there and not force:
        click.echo(f"harness init: {', '.join(str(root / rel) for rel in there)} "
                   f"{'is' if len(there) == 1 else 'are'} there already: nothing written "
                   "(--force replaces them)", err=True)
        raise SystemExit(ExitCode.USAGE)
    try:
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    except OSError as exc:
        raise click.BadParameter(f"cannot write {exc.filename}: {exc.strerror}",
                                 param_hint="'DIRECTORY'") from None
    for rel in files:
        click.echo(f"wrote {root / rel}")
    where = "here" if root.resolve() == Path.cwd().resolve() else f"from {root}"
    click.echo(f"\nnext: edit {root / TARGET_FILE}: {edit}.\nthen, {where}:\n"
               f"    harness run --target {target}"
               f"{'' if workload == DEFAULT_WORKLOAD else f' --workload {workload}'}"
               f"   # the catalog, a matrix and reports (seconds)\n"
               f"    {_pytest()}python -m pytest {TEST_FILE}   # the same, as tests\n"
               f"{WORKFLOW_FILE} runs it every night and on every pull request "
               "(set the repository variable PIP_HARNESS to where pip gets the harness, pinned: "
               "it is not on PyPI under that name).")


def _pytest() -> str:
    """``pip install pytest && `` where this environment has no pytest (the harness's own
    install does not bring it), so the line runs as printed."""
    import importlib.util

    return "" if importlib.util.find_spec("pytest") else "pip install pytest && "
