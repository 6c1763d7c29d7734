"""The fleet: every process a topology declares, brought up, watched, repaired and brought down.

    plan.py            Topology -> LaunchPlan: every process `ops up` would start, as plain data (pure)
    process_spec.py    one process of a plan: what to run, where, its part in a bigger model (pure)
    parallel_plan.py   the commands of a model laid out over ranks, stages and Ray nodes (pure)
    ray_gate.py        in front of a Ray model's server: waits until every Ray node joined, then execs it
    node_groups.py     a plan's processes grouped by node, each node with its backend
    backends/          local, tmux, ssh and slurm: start, stop and see processes on one node
    argv_check.py      each node's own vLLM parses the exact argv before anything starts, one process per node
                       and interpreter (+ its program, its runners per backend, its cache)
    indexes.py         retrieval indexes built from a service's corpus before `ops up` starts it
    lifecycle.py       `ops up` on every node a topology names
    teardown.py        `ops down` (and what a failed `ops up` stops): every node stopped through its backend
    readiness.py       waiting until every process serves (probes.py: one probe of one endpoint)
    repair.py          restarting the processes that died, or one by name (`ops restart`)
    views.py           what `ops health`, `ops status` and `ops logs` show
    state.py           `.ops/<name>/state.json`: what `ops up` started, written atomically
    endpoints.py       the endpoints file (ToolOrchestra's model_config JSON)
    lora_argv.py       the vLLM flags and environment of a model that serves LoRA adapters (pure)
    lora/              adapters loaded into running replicas, their record, their reload into a repaired one
    prefix_counters.py vLLM's prefix-cache counters read from /metrics (what affinity is seen by)
"""
