"""LoRA adapters on the fleet: declared in the topology or loaded into running replicas.

    adapter.py    what vLLM checks in an adapter directory, checked before anything starts
    flags.py      the vLLM flags and environment a model with adapters is launched with (pure)
    checks.py     topology checks: adapter names, flags, and each declared adapter directory
    records.py    `.ops/<name>/lora.json`: the adapters `ops lora load` put into running replicas
    runtime.py    `ops lora load/unload/list`: vLLM's runtime endpoints on every replica of a model

vLLM selects an adapter by the request's `model` field, so an adapter is one more key of the
endpoints file, listing its base model's replicas, and one more target of the routing.
"""
