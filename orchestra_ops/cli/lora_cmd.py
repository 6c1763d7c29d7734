"""`ops lora load|unload|list`: LoRA adapters in and out of a running fleet (orchestra_ops/fleet/lora/runtime.py)."""

from __future__ import annotations

import click

from orchestra_ops.cli.render import echo_json, print_table, stderr_console, wide_option


@click.group("lora")
def lora() -> None:
    """Serve a LoRA adapter from every replica of a running model, or stop serving it.

    With PEFT's save_pretrained output in ./output, on a fleet that is up (topologies/local.yaml):

    \b
      ops lora load ft ./output --model answer     load into every replica, all or none
      ops eval gsm8k --model answer --model ft --limit 20 --run-dir runs/gsm8k-ft
      ops lora list                                what each replica serves
      ops lora unload ft                           out of every replica and the endpoints file

    The model needs `runtime_lora: true` in the topology; adapters in `lora_modules` load at `ops up`.
    """


_TOPOLOGY = click.option("--topology", help="The topology that is up (default: the most recent one).")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@lora.command("load")
@click.argument("name")
@click.argument("path", type=click.Path(file_okay=False))
@click.option("--model", help="The model (key, served name or role) that serves it; default: the only one with "
                              "runtime_lora: true.")
@click.option("--timeout", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Seconds for the whole load: the lock, asking every replica what it serves, the loads (a "
                   "replica that takes longer fails it, and it is rolled back).")
@_TOPOLOGY
@_JSON
@wide_option
def load(name: str, path: str, model: str | None, timeout: float, topology: str | None, as_json: bool) -> None:
    """Load adapter NAME from directory PATH into every replica of a running model (all or none)."""
    from orchestra_ops.fleet.lora.runtime import load_adapter

    report = load_adapter(name, path, model=model, topology=topology, timeout_s=timeout)
    if as_json:
        echo_json(report.to_json())
        return
    rank = f", rank {report.rank}" if report.rank is not None else ""
    print_table(f"'{name}' ({report.path}{rank}) loaded into {report.model}: {len(report.outcomes)} replica(s)",
                ["replica", "address", "status", "detail"],
                [(o.replica, o.address, "-" if o.status is None else o.status, o.message) for o in report.outcomes])
    console = stderr_console()
    console.print(f"{report.endpoints_file}: '{name}' -> {len(report.outcomes)} replica(s) of {report.served_name}",
                  highlight=False)
    console.print(f"next: ops eval gsm8k --model {report.model} --model {name}", highlight=False)


@lora.command("unload")
@click.argument("name")
@click.option("--model", help="Unload from every replica of this model even if `ops lora load` did not load it.")
@_TOPOLOGY
@_JSON
@wide_option
def unload(name: str, model: str | None, topology: str | None, as_json: bool) -> None:
    """Unload adapter NAME from every replica that serves it; it leaves the endpoints file."""
    from orchestra_ops.fleet.lora.runtime import unload_adapter

    report = unload_adapter(name, model=model, topology=topology)
    if as_json:
        echo_json(report.to_json())
        return
    print_table(f"'{name}' unloaded from {report.model}: {len(report.outcomes)} replica(s)",
                ["replica", "address", "status", "detail"],
                [(o.replica, o.address, o.status, o.message) for o in report.outcomes])


@lora.command("list")
@_TOPOLOGY
@_JSON
@wide_option
def list_(topology: str | None, as_json: bool) -> None:
    """The adapters each model replica serves now (from its /v1/models)."""
    from orchestra_ops.fleet.lora.runtime import list_adapters

    listing = list_adapters(topology)
    if as_json:
        echo_json(listing.to_json())
        return
    rows = [(r.replica, r.address, r.model,
             ", ".join(f"{a} ({listing.origin(a)})" for a in r.adapters) or ("-" if not r.error else r.error))
            for r in listing.replicas]
    print_table(f"{listing.topology}: adapters per replica", ["replica", "address", "model", "adapters"], rows)
