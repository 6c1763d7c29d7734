"""The Python API: what a script or a training loop calls (no CLI, no printing; our exceptions, errors.py).

    from orchestra_ops.api import EvalOptions, evaluate
    result = evaluate(EvalOptions(model_config="model_config.json", dataset="qs.jsonl", run_dir="runs/qs"), "chat")
    result.scores, result.total_ok, result.missing, result.report_file

    from orchestra_ops.api import posttrain
    result = posttrain(topology="fleet.yaml", model="base", adapter="ft=./out/checkpoint-200",
                       datasets="gsm8k,mmlu", max_drop=1.0, timeout_s=3600)
    if result["verdict"] == "block": ...

    session.py   evaluate: the one eval session (`ops eval`, its supervised child, posttrain and the
                 benches all go through it); EvalResult
    training.py  posttrain: `ops posttrain` as a call; run_posttrain: posttrain.py's gate with its eval
                 run by the session (posttrain.py sits below the API and gets `evaluate` passed in)
"""

from __future__ import annotations

from orchestra_ops.api.session import EvalResult, evaluate
from orchestra_ops.api.training import PosttrainOptions, posttrain
from orchestra_ops.runner.options import EvalOptions

__all__ = ["EvalOptions", "EvalResult", "PosttrainOptions", "evaluate", "posttrain"]
