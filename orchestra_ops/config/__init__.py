"""What a topology file says: its schema (topology.py, model_spec.py, nodes.py), the loader that keeps every key's YAML
line (loader.py, yamlpos.py), the cross-field checks (checks.py, lora_checks.py, adapter_dir.py) and which
GPUs or cores each process gets (placement.py), port clashes (port_checks.py); a model bigger than one GPU
or host: its tensor, pipeline and data parallel settings (parallel.py) and their layout over servers, ranks,
stages and Ray nodes (layout.py).
Pure: no process is started and nothing is written here."""
