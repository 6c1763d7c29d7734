"""`ops posttrain`: load an adapter, score base and adapter side by side, unload it, and gate on the result.

Exit codes: 0 pass, 1 block, 2 bad input, 3 fleet or adapter load, 4 eval failure, 6 inconclusive
(the interval holds -max-drop: the message says how many samples would likely decide it), 124 time
limit (rerunning the same command resumes). The library: orchestra_ops/posttrain/, its eval run by the one
eval session (orchestra_ops/api/training.py's run_posttrain passes orchestra_ops.api.evaluate in).
"""

from __future__ import annotations

from typing import Any

import click

from orchestra_ops.cli.render import echo_json, print_table, wide_option
from orchestra_ops.core.headline import format_difference, format_score

BLOCK_EXIT = 1


@click.command("posttrain")
@click.option("--topology", required=True, help="A topology file (needed with --up), or the name of one that is up.")
@click.option("--model", required=True, help="The base model (key, served name or role); it serves the adapter.")
@click.option("--adapter", required=True, metavar="NAME=DIR", help="The adapter to load as NAME from DIR.")
@click.option("--datasets", default="gsm8k,mmlu", show_default=True,
              help="Comma-separated OpenCompass-scored suites (any `ops eval` suite OpenCompass scores).")
@click.option("--max-drop", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Pass when adapter - base's paired 95% interval lies above -MAX_DROP points, block when it "
                   "lies below, else inconclusive (exit 6).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=3600.0, show_default=True,
              help="Seconds for the whole call (exit 124 past it; rerun to resume).")
@click.option("--up/--no-up", "up", default=False, help="`ops up TOPOLOGY` first.")
@click.option("--down/--no-down", "down", default=False, help="`ops down` at the end, whatever the outcome.")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Default: runs/posttrain-<adapter>-<topology>/.")
@click.option("--dataset", "dataset_root", type=click.Path(file_okay=False),
              help="A folder holding one dataset folder per suite (ROOT/gsm8k, ROOT/mmlu, …).")
@click.option("--dataset-dir", "dataset_dirs", multiple=True, metavar="NAME=PATH", help="One suite's dataset.")
@click.option("--concurrency", type=click.IntRange(min=1), default=64, show_default=True, help="Units in flight.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="max_tokens of every request (default: each suite's).")
@click.option("--sample", type=click.IntRange(min=1), help="A seeded random N samples per dataset.")
@click.option("--seed", type=int, help="Seed of --sample.")
@click.option("--cache", is_flag=True, help="Answer repeated requests from the response cache ($OPS_HOME/cache/).")
@click.option("--cache-file", type=click.Path(dir_okay=False), help="The response cache's file (implies --cache).")
@click.option("--cache-sampled", is_flag=True, help="Cache requests with temperature > 0 too.")
@click.option("--json", "as_json", is_flag=True, help="Print posttrain.json instead of the table.")
@wide_option
def posttrain(topology: str, model: str, adapter: str, datasets: str, max_drop: float, timeout: float, up: bool,
              down: bool, run_dir: str | None, dataset_root: str | None, dataset_dirs: tuple[str, ...],
              concurrency: int, max_tokens: int | None, sample: int | None, seed: int | None, cache: bool,
              cache_file: str | None, cache_sampled: bool, as_json: bool) -> None:
    """Evaluate adapter NAME=DIR against its base model on --datasets and print a pass/block/inconclusive verdict.

    With PEFT's save_pretrained output in ./output, from the repository root:

    \b
      ops posttrain --topology topologies/local.yaml --up --model answer --adapter ft=./output \\
          --datasets gsm8k,mmlu --max-drop 1.0

    On the bundled sets (40 samples each) this exits 6 (inconclusive): the interval is too wide to decide, and
    the message says about how many paired samples would. Exit 0 pass, 1 block, 6 inconclusive.
    """
    from orchestra_ops.api.training import PosttrainOptions, run_posttrain
    from orchestra_ops.cli.eval_cmd import cache_path
    from orchestra_ops.errors import Inconclusive
    from orchestra_ops.evals.opencompass.multi import parse_dataset_dirs
    from orchestra_ops.posttrain.decision import inconclusive_message

    options = PosttrainOptions(topology=topology, model=model, adapter=adapter, datasets=datasets, max_drop=max_drop,
                               timeout_s=timeout, up=up, down=down, run_dir=run_dir, concurrency=concurrency,
                               dataset_dirs=parse_dataset_dirs(dataset_dirs), dataset_root=dataset_root,
                               max_tokens=max_tokens, sample=sample, seed=seed,
                               cache=cache_path(cache, cache_file, cache_sampled), cache_sampled=cache_sampled)
    result = run_posttrain(options, console=None if as_json else lambda line: click.echo(line, err=True))
    if as_json:
        echo_json(result)
    else:
        _render(result)
    if result["verdict"] == "block":
        click.get_current_context().exit(BLOCK_EXIT)
    if result["verdict"] == "inconclusive":
        raise Inconclusive(inconclusive_message(result))


def _render(result: dict[str, Any]) -> None:
    rows = []
    for name, row in result["datasets"].items():
        low, high = row["ci95"] or (None, None)
        rows.append((name, row["metric"], format_score(row["base"]), format_score(row["adapter"]),
                     format_difference(row["delta"], low, high), row["verdict"] or "-"))
    adapter = result["adapter"]["name"]
    print_table(f"{adapter} vs {result['base']} (max drop {result['max_drop']:g} points)",
                ["dataset", "metric", result["base"], adapter, f"{adapter} − {result['base']} (95% CI)", "verdict"],
                rows, whole=(f"{adapter} − {result['base']} (95% CI)",))
    click.echo(f"verdict: {result['verdict'].upper()}  ({result['run_dir']}/posttrain.json)")
