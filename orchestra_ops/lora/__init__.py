"""LoRA adapters loaded into running replicas: `ops lora load/unload/list` (runtime.py) over vLLM's runtime
endpoints on every replica of a model, all or none (calls.py).

The rest of the LoRA story lives with the layer it belongs to: the topology's LoRA fields and the check of an
adapter directory in config/ (lora_checks.py, adapter_dir.py), the vLLM flags and the record of loaded
adapters in fleet/ (lora_argv.py, lora_records.py). vLLM selects an adapter by the request's `model` field,
so an adapter is one more key of the endpoints file, listing its base model's replicas, and one more target
of the routing.
"""
