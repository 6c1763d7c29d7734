"""Nodes: which backend each gets, the address its servers bind, and the errors in ssh:/slurm: settings."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.plan import plan

MIXED = """\
name: t
backend: tmux
nodes:
  here: {host: localhost, gpus: 0}
  lan: {host: 127.0.0.5, gpus: 0, bind: 127.0.0.5}
  far: {host: gpu-box, gpus: 2, ssh: {user: me, port: 2222, jump: bastion}}
  farbound: {host: gpu-box2, gpus: 0, bind: 10.1.2.3}
  alloc: {slurm: {partition: gpu, gpus: 4, time: "2:00:00"}}
  allocbound: {slurm: {gpus: 0}, bind: 127.0.0.1}
  shared: {host: localhost, gpus: 0, bind: 0.0.0.0}
models:
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    return path


def _mixed(tmp_path: Path) -> Path:
    models = "".join(f"  m{i}: {{model: m, engine: sim, node: {node}, gpus_per_replica: 0, port: {9000 + i}}}\n"
                     for i, node in enumerate(["here", "lan", "far", "farbound", "alloc", "allocbound", "shared"]))
    return _write(tmp_path, MIXED + models)


def test_each_node_gets_its_backend(tmp_path: Path) -> None:
    topology = load_topology(_mixed(tmp_path))
    backends = {name: node.backend(topology.backend) for name, node in topology.nodes.items()}
    assert backends == {"here": "tmux", "lan": "ssh", "far": "ssh", "farbound": "ssh", "alloc": "slurm",
                        "allocbound": "slurm", "shared": "tmux"}
    assert topology.nodes["here"].backend("local") == "local"


def test_connect_and_bind_addresses(tmp_path: Path) -> None:
    launch_plan = plan(load_topology(_mixed(tmp_path)), state_dir="/s")
    where = {spec.node: (spec.host, spec.bind_host) for spec in launch_plan.processes}
    assert where == {
        "here": ("127.0.0.1", "127.0.0.1"),  # this machine: loopback unless told otherwise
        "lan": ("127.0.0.5", "127.0.0.5"),
        "far": ("gpu-box", "0.0.0.0"),  # another host: every address, as vLLM does by default
        "farbound": ("gpu-box2", "10.1.2.3"),
        "alloc": (None, "0.0.0.0"),  # known once slurm allocates the node
        "allocbound": (None, "127.0.0.1"),
        "shared": ("127.0.0.1", "0.0.0.0"),  # listens everywhere, reached here over loopback
    }
    assert launch_plan.by_name("m3/0").argv[3:7] == ("--host", "10.1.2.3", "--port", "9003")


@pytest.mark.parametrize("node, message", [
    ("{host: localhost, bind: my-host}",
     "nodes.n.bind: 'my-host' is not an IP address to listen on (e.g. 0.0.0.0, 127.0.0.2)"),
    ("{host: localhost, ssh: {user: me}}", "nodes.n.ssh: 'localhost' is this machine; 'ssh' applies to nodes on "
                                           "other hosts"),
    ("{host: h, ssh: {host_key_check: no}}", "nodes.n.ssh.host_key_check: False is not one of 'strict' or "
                                            "'accept-new'"),
    ("{host: h, ssh: {port: 0}}", "nodes.n.ssh.port: port 0 is outside 1-65535"),
    ("{slurm: {partition: gpu, time: 4:00:00}}", "nodes.n.slurm.time: quote the time limit, e.g. time: \"4:00:00\" "
                                                 "(YAML read an unquoted H:MM:SS as the number 14400)"),
    ("{slurm: {time: four hours}}", "nodes.n.slurm.time: 'four hours' is not a slurm time limit (MINUTES, HH:MM:SS, "
                                    "D-HH, D-HH:MM:SS)"),
    ("{slurm: {partition: 'gpu --mem=1'}}", "nodes.n.slurm.partition: 'gpu --mem=1' must be one word (no spaces, "
                                            "quotes or '#')"),
    ("{slurm: {extra_args: [constraint=a100]}}", "nodes.n.slurm.extra_args: 'constraint=a100' is not one sbatch "
                                                 "option (e.g. --constraint=a100)"),
    ("{slurm: {gpus: 2}, ssh: {user: me}}", "nodes.n: 'ssh' does not apply to a slurm node"),
])
def test_node_errors_name_the_field(tmp_path: Path, node: str, message: str) -> None:
    path = _write(tmp_path, f"name: t\nnodes:\n  n: {node}\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert info.value.problems == [f"{path}:3: {message}"]


def test_every_node_is_slurm_under_backend_slurm(tmp_path: Path) -> None:
    path = _write(tmp_path, textwrap.dedent("""\
        name: t
        backend: slurm
        nodes:
          a: {slurm: {gpus: 1}}
          b: {host: localhost}
        """))
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert info.value.problems == [
        f"{path}:5: nodes.b.host: with backend: slurm every node is a slurm node; give this one 'slurm:' "
        "settings, or set backend: local or tmux (nodes with a host on other machines are reached over ssh)"]


def test_the_bundled_dev_cluster_topologies_use_the_backends_they_show(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "topologies"
    slurm = load_topology(root / "slurm_local.yaml")
    assert {node.backend(slurm.backend) for node in slurm.nodes.values()} == {"slurm"}
    ssh = load_topology(root / "ssh_local.yaml")
    assert {name: node.backend(ssh.backend) for name, node in ssh.nodes.items()} == {"remote": "ssh"}
    assert ssh.nodes["remote"].bind == ssh.nodes["remote"].host == "127.0.0.2"
