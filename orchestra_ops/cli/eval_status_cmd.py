"""`ops eval-status RUN_DIR`: done, failed (by error type) and missing samples of a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from orchestra_ops.cli.render import echo_json, print_table, wide_option
from orchestra_ops.runner.progress import format_wall
from orchestra_ops.runner.status import run_status, write_samples

if TYPE_CHECKING:
    from orchestra_ops.runner.suite import Suite


@click.command("eval-status")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--missing-out", type=click.Path(dir_okay=False), help="Write the missing samples here (JSONL).")
@wide_option
def eval_status(run_dir: str, as_json: bool, missing_out: str | None) -> None:
    """How far the run in RUN_DIR got: ok, failed by error type, missing (against its dataset), its score ± its
    95 % interval and the wall time so far."""
    status = run_status(run_dir, registered_suite)
    if missing_out:
        write_samples(missing_out, status.missing_samples)
    if as_json:
        echo_json(status.to_json())
        return
    missing = "?" if status.missing is None else str(status.missing)
    rows: list[tuple[str, str]] = [("dataset", f"{status.dataset or '?'} ({status.dataset_size or '?'} samples)"),
                                   ("ok", str(status.ok)), ("failed", str(status.failed))]
    rows += [(f"  {kind}", str(count)) for kind, count in status.failed_by_type.items()]
    rows.append(("missing", missing))
    if status.headline is not None:
        rows += [("score", part) for part in status.headline.parts()] or [("score", status.headline.note)]
    if status.elapsed_s is not None:
        rows.append(("elapsed", format_wall(status.elapsed_s)))
    if status.extra:
        rows.append(("not in dataset", str(status.extra)))
    if status.bad_lines:
        rows.append(("unreadable lines", str(status.bad_lines)))
    print_table(f"run {status.run_dir}", ["", ""], rows)
    if missing_out:
        click.echo(f"wrote {len(status.missing_samples)} missing sample(s) to {missing_out}")


def registered_suite(name: str) -> Suite | None:
    """The registered suite of that name (its units are what the run ran), else None (a plain JSONL dataset)."""
    from orchestra_ops.evals.registry import SUITES, load_suite  # only the suite the run dir names is imported

    return load_suite(name) if name in SUITES else None
