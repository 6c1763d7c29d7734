"""orchestra-ops: one topology file and the `ops` command, for LLM evals on your own GPU fleet.

The wings, from the face down (each imports only those below it; pyproject.toml's import-linter contracts
hold the house to this, `make lint` checks them):

    cli/          the `ops` command: parse, call the library, render, pick the exit code (nothing below imports it)
    api           the Python API a training loop or a script calls (evaluate, posttrain)
    posttrain/    `ops posttrain`: an adapter in, base-vs-adapter scores and a verdict out
    supervise/    `ops eval --detach`, `ops runs`, `ops stop`: runs that finish by themselves
    export/       MLflow and W&B (a suite's own formats live in its package under evals/)
    analysis/     `ops analyze`, `ops compare`: latency tables, plots, the report
    evals/        the suites, one package per suite or family (installed as orchestra_ops.evals; the folder is
                  `evals/` at the top of the repository)
    runner/       the async eval engine: prepare, run, resume, results, tee logs, profile (imports no suite)
    sandbox/      model-written code, isolated (bubblewrap)
    client/       HTTP to the fleet: replica pools, retries, routing, the response cache
    fleet/        `ops up`/`down`/`health`/`restart`/`lora`: plan, backends (local, tmux, ssh, slurm), readiness,
                  state, LoRA adapters in running replicas
    services/     what `ops up` starts besides vLLM: the simulated engine and the retrieval server (installed
                  as orchestra_ops.services; the folder is `services/` at the top of the repository)
    config/       the topology file: schema, loader with YAML lines, checks, placement
    core/         paths, safe file writes, redaction, processes, log tails, statistics
    errors.py     the one exception tree, each error with its exit code
"""

__version__ = "0.1.0"
