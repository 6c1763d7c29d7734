"""LoRA adapters on the fleet's replicas.

    loaded.py    `.ops/<name>/lora.json`: the adapters `ops lora load` put into running replicas
    calls.py     vLLM's runtime endpoints on one replica: load, unload, and /v1/models to be sure
    loading.py   a load on every replica of a model, all or none: adopted where served from the same dir,
                 rolled back on a refusal, a time-out or a signal
    runtime.py   `ops lora load/unload/list`
    reload.py    a repaired replica (`ops up`, `ops restart`) gets the runtime adapters its model had

The vLLM flags of a model that serves adapters are the planner's (fleet/lora_argv.py); the topology's LoRA
fields and the check of an adapter directory are config's (config/lora_checks.py,
config/adapter_dir.py). vLLM selects an adapter by the request's `model` field, so an adapter is one more
key of the endpoints file, listing its base model's replicas, and one more target of the routing.
"""
