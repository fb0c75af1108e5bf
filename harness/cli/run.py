"""``harness run`` (scenarios x targets, the matrix and its reports) and ``harness replay``
(one cell again)."""

from __future__ import annotations

import sys

import click

from harness.cli import common, stop
from harness.cli.options import (
    CHECK_DETERMINISM,
    CLUSTER,
    REPORTS,
    SELECTION,
    VERDICT,
    WORLD,
    options,
)
from harness.vocabulary import UNEXERCISED, UNEXPECTED, ExitCode, plural


@click.command("run")
@options(SELECTION, WORLD, VERDICT)
@CHECK_DETERMINISM
@click.option("--jobs", "-j", default=None, type=click.IntRange(min=1),
              help="Cells run in parallel. Default: the number of cores.")
@options(REPORTS)
@click.option("--verbose", "-v", is_flag=True, default=False,
              help="Each failing cell's whole detail and how each group of its ranks ended, "
                   "not one line (matrix.txt and the HTML report always have them).")
@click.option("--seeds", "seed_spec", default=None, metavar="SEEDS",
              help="A campaign over several seeds: every cell at each seed, as 0-24 or 0,3,7-9 "
                   "(instead of --seed).")
@CLUSTER
@click.pass_context
def run_command(ctx: click.Context, scenarios: tuple[str, ...], targets: tuple[str, ...],
                workload: str, data: str | None, config_file: str | None, checker: str | None,
                topology: str | None, mount_texts: tuple[str, ...], seed: int,
                timeout: float | None, require_exercised: bool, check_determinism: bool,
                jobs: int | None, report_dir: str, formats: tuple[str, ...], baseline: str | None,
                verbose: bool, seed_spec: str | None, cluster: str | None) -> None:
    """Run scenarios x targets and write the matrix's reports.

    With no arguments: the whole catalog against the built-in targets.

    \b
    harness run --seeds 0-24 --cluster local:2          # 2,125 cells on 2 local workers
    harness run --seeds 0-24 --cluster tcp://sched:8786  # on an existing Dask cluster
    """
    if cluster is None:  # torch's import (seconds) beside the rest of the harness's start-up
        from harness.world import pool

        pool.begin()
    seeds = [seed]
    if seed_spec is not None:
        if ctx.get_parameter_source("seed") is not click.core.ParameterSource.DEFAULT:
            raise click.UsageError("give either --seed or --seeds, not both")
        seeds = common.seed_list(seed_spec)
    if cluster is not None and jobs is not None:
        raise click.UsageError("--jobs is the cluster's threads with --cluster: leave it out")
    if cluster is not None and check_determinism:
        raise click.UsageError("--check-determinism runs each cell twice on this machine: "
                               "leave out --cluster")
    known = common.known_from(baseline)
    target_list = common.targets_from(targets, workload, checker, data, config_file)
    if cluster is None:  # the targets' imports next
        pool.start(m for t in target_list for m in t.modules())
    from rich.console import Console

    from harness.reports import write_run
    from harness.runner.run import plan_cells

    scenario_list = common.scenarios_from(scenarios, data, config_file, mount_texts)
    plans = [p for s in seeds for p in plan_cells(scenario_list, target_list, s, topology, timeout)]
    if not plans:
        raise click.UsageError("no cell to run: no target belongs to these scenarios' workloads")
    # The terminal report is always printed; it is also written (matrix.txt, every detail in
    # full) beside the other files, but alone it makes no report directory.
    files = common.report_formats(formats)
    if files == ["terminal"]:
        files = []
    run_dir = common.new_run_dir(report_dir) if files else None
    console = Console(stderr=True)
    try:
        if cluster is None:
            matrix = common.run_with_progress(plans, jobs, seeds[0], known, console,
                                              check_determinism=check_determinism)
        else:
            with common.connect(cluster) as engine:
                click.echo(f"harness: {plural(len(plans), 'cell')} on {cluster} ({engine.threads} "
                           "threads)", err=True)
                matrix = common.run_with_progress(plans, jobs, seeds[0], known, console,
                                                  engine.run_matrix)
    except KeyboardInterrupt:  # before the run took charge of Ctrl-C: no cell ran
        matrix = common.nothing_ran(plans, seeds[0])
    with stop.held() as held:
        paths = write_run(matrix, run_dir, files) if run_dir else {}
    common.print_matrix(matrix, verbose)
    common.print_paths(paths)
    if held:
        sys.exit(stop.status())
    common.exit_for(matrix, require_exercised)


@click.command("replay")
@options(SELECTION, WORLD, VERDICT)
@CHECK_DETERMINISM
@click.argument("report", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--cell", default=None, help="With REPORT: the cell to replay, as scenario[target].")
def replay_command(scenarios: tuple[str, ...], targets: tuple[str, ...], workload: str,
                   data: str | None, config_file: str | None, checker: str | None,
                   topology: str | None, mount_texts: tuple[str, ...], seed: int,
                   timeout: float | None, require_exercised: bool, check_determinism: bool,
                   report: str | None, cell: str | None) -> None:
    """Rerun exactly one cell, from its replay command or from a saved report.

    \b
    harness replay --scenario isolated-tmp --target naive-sync --seed 0
    harness replay reports/latest/matrix.json --cell 'isolated-tmp[naive-sync]'
    harness replay reports/latest/matrix.json --cell 'isolated-tmp[naive-sync] seed 7'
    """
    from harness.world import pool

    pool.begin()  # torch's import beside the rest of the harness's start-up
    from harness.reports.diagnosis import describe
    from harness.runner.run import plan_cells, run_cell

    if cell and not report:
        raise click.UsageError("--cell names a cell of a saved report: give the report too, "
                               "as harness replay reports/latest/matrix.json --cell ...")
    if report:
        if not cell:
            raise click.UsageError("with a report, name the cell: --cell 'scenario[target]'")
        replay = common.replay_from(report, cell)
        again = ["--check-determinism"] if check_determinism else []
        return replay_command.main(replay.argv()[2:] + again, standalone_mode=False)
    chosen = common.scenarios_from(scenarios, data, config_file, mount_texts) if scenarios else []
    if len(chosen) != 1 or len(targets) != 1:  # a glob may name several
        raise click.UsageError("replay runs one cell: give one --scenario and one --target")
    plans = plan_cells(chosen, common.targets_from(targets, workload, checker, data, config_file),
                       seed, topology, timeout)
    if not plans:
        raise click.UsageError("this target does not belong to the scenario's workload")
    if check_determinism:
        from harness.runner.determinism import twice

        result = twice(run_cell)(plans[0])
    else:
        result = run_cell(plans[0])
    click.echo(describe(result))
    failing = (UNEXPECTED, UNEXERCISED) if require_exercised else (UNEXPECTED,)
    sys.exit(ExitCode.FAILED if result.verdict in failing else ExitCode.OK)
