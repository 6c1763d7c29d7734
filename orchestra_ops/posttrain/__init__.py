"""`ops posttrain` / `orchestra_ops.api.posttrain`: one adapter in, base-vs-adapter scores and a verdict out.

    [--up: ops up TOPOLOGY]
    -> load the adapter into every replica of the base model (lora/runtime.py: checked first, all or none)
    -> the opencompass suite (evals/opencompass/multi.py) over --datasets, base and adapter side by side,
       through the one eval session (api/session.py's `evaluate`, passed in: this module sits below the
       API), in one run dir: OpenCompass's predictions/, results/, summary/summary.csv, our scores.json
    -> unload the adapter
    -> posttrain.json: per dataset base, adapter, adapter - base with its paired 95 % interval, a verdict
    [--down: ops down]

Verdict per dataset, from the headline's paired 95 % interval of adapter - base (a paired bootstrap
over all its samples, weighted as the headline is: multi_opencompass.py, opencompass/paired.py; it
exists whenever there are two or more paired samples): `pass` when the interval's lower end is above
-max_drop, `block` when its upper end is below -max_drop, `inconclusive` otherwise (the interval
holds -max_drop, or there is no interval), with an estimate of how many paired samples would decide
it (`samples_to_decide`). The run's verdict: `block` if any dataset blocks, else `incomplete` if one
has no score, else `inconclusive` if one is, else `pass`. posttrain.json records each interval and
how it was computed (`interval`).

Failures are our exceptions (errors.py): ConfigError (2) bad input, LaunchError (3) the fleet or the
adapter load, EvalError (4) units that failed (their datasets have no score), RunTimeout (124) the
wall-clock limit, Interrupted (130) a signal (a load it cuts short is rolled back). `--timeout` bounds
every step: `--up`'s readiness wait, the load (a replica that does not answer in time fails it, and it
is rolled back), the eval, and the unload (which gets at least UNLOAD_GRACE_S, so a run at its limit
leaves nothing loaded); a limit reached after every unit finished still scores. Nothing is lost on
any of them: the run dir keeps every finished unit and the same call again resumes it (and retries
its failed units).

    options.py   PosttrainOptions, the adapter argument, the run dir, the session it is handed
    steps.py     the fleet and adapter steps, each within what is left of `--timeout`
    decision.py  the verdict rule and the samples that would decide an inconclusive one
    gate.py      the whole call: up, load, the eval, unload, posttrain.json
"""
