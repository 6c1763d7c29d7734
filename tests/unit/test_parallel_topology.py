"""Models bigger than one GPU or host, and vLLM's own data parallelism: golden plans per mode (argv, env,
placement, endpoints) and a located error for each shape that cannot work."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.errors import TopologyError
from orchestra_ops.fleet.endpoints import endpoints_for
from orchestra_ops.fleet.plan import LaunchPlan, plan
from orchestra_ops.fleet.ray_gate import GATE_NAME

NODES = """\
name: big
nodes:
  gpu8: {host: gpu-box, gpus: 8}
  pair: {hosts: [10.0.0.1, 10.0.0.2], gpus: 8}
  cpu: {host: localhost, gpus: 0, cpus: 4}
models:
"""


def _plan(tmp_path: Path, models: str) -> LaunchPlan:
    path = tmp_path / "big.yaml"
    path.write_text(NODES + textwrap.indent(textwrap.dedent(models), "  "))
    return plan(load_topology(path), state_dir="/state/big")


def _errors(tmp_path: Path, models: str, nodes: str = NODES) -> list[str]:
    path = tmp_path / "big.yaml"
    path.write_text(nodes + textwrap.indent(textwrap.dedent(models), "  "))
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    return [line.split("big.yaml:", 1)[1] for line in info.value.problems]


def _env(spec: object) -> dict[str, str]:
    env = dict(spec.env)
    cache = env.pop("VLLM_CACHE_ROOT")
    assert env.pop("TORCHINDUCTOR_CACHE_DIR") == f"{cache}/inductor"  # its own kernel cache, never the shared one
    return env


def test_tensor_and_pipeline_parallel_inside_one_host(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        a: {model: org/A-70B, node: gpu8, replicas: 2, tensor_parallel: 2, pipeline_parallel: 2, port: 8000}
        """)
    assert [(s.name, s.gpus, s.port) for s in launch.processes] == [("a/0", (0, 1, 2, 3), 8000),
                                                                     ("a/1", (4, 5, 6, 7), 8001)]
    assert list(launch.by_name("a/1").argv) == [
        "vllm", "serve", "org/A-70B", "--host", "0.0.0.0", "--port", "8001", "--tensor-parallel-size", "2",
        "--pipeline-parallel-size", "2"]
    assert launch.by_name("a/1").env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert endpoints_for(launch) == {"org/A-70B": [{"ip_addr": "gpu-box", "port": 8000},
                                                   {"ip_addr": "gpu-box", "port": 8001}]}


def test_tensor_parallel_on_a_cpu_node_binds_one_core_list_per_rank(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        t: {model: /m/tiny, node: cpu, gpus_per_replica: 0, tensor_parallel: 2, port: 8200}
        u: {model: /m/tiny2, node: cpu, gpus_per_replica: 0, cpus_per_replica: 1, port: 8300}
        """)
    tiny = launch.by_name("t/0")
    assert tiny.argv[-2:] == ("--tensor-parallel-size", "2")
    assert _env(tiny) == {"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1", "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    assert launch.by_name("u/0").env["VLLM_CPU_OMP_THREADS_BIND"] == "2"  # the next free core


def test_vllm_internal_dp_with_expert_parallel_is_one_server_and_one_endpoint(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        moe:
          model: deepseek-ai/DeepSeek-V2-Lite
          node: gpu8
          replicas: 4
          tensor_parallel: 2
          port: 8000
          data_parallel: {mode: vllm-internal, expert_parallel: true, rpc_port: 13345}
        """)
    (server,) = launch.processes
    assert (server.name, server.gpus, server.ranks, server.domain) == ("moe/0", tuple(range(8)), (0, 1, 2, 3), None)
    assert list(server.argv) == [
        "vllm", "serve", "deepseek-ai/DeepSeek-V2-Lite", "--host", "0.0.0.0", "--port", "8000",
        "--tensor-parallel-size", "2", "--data-parallel-size", "4", "--data-parallel-rpc-port", "13345",
        "--enable-expert-parallel"]
    assert endpoints_for(launch) == {"deepseek-ai/DeepSeek-V2-Lite": [{"ip_addr": "gpu-box", "port": 8000}]}


def test_vllm_external_dp_is_one_server_per_rank_with_its_own_port_and_devices(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        moe:
          model: Qwen/Qwen3-30B-A3B
          node: pair
          replicas: 4
          tensor_parallel: 2
          port: 8000
          data_parallel: {mode: vllm-external, expert_parallel: true}
        """)
    rows = [(s.name, s.node, s.host, s.port, s.gpus, s.ranks, s.domain) for s in launch.processes]
    assert rows == [("moe/0", "pair@0", "10.0.0.1", 8000, (0, 1), (0,), "moe"),
                    ("moe/1", "pair@0", "10.0.0.1", 8001, (2, 3), (1,), "moe"),
                    ("moe/2", "pair@1", "10.0.0.2", 8000, (0, 1), (2,), "moe"),
                    ("moe/3", "pair@1", "10.0.0.2", 8001, (2, 3), (3,), "moe")]
    assert list(launch.by_name("moe/2").argv) == [
        "vllm", "serve", "Qwen/Qwen3-30B-A3B", "--host", "0.0.0.0", "--port", "8000", "--tensor-parallel-size",
        "2", "--data-parallel-size", "4", "--data-parallel-rank", "2", "--data-parallel-address", "10.0.0.1",
        "--data-parallel-rpc-port", "29550", "--enable-expert-parallel"]
    assert [e["port"] for e in endpoints_for(launch)["Qwen/Qwen3-30B-A3B"]] == [8000, 8001, 8000, 8001]


def test_vllm_hybrid_dp_is_one_api_server_per_host_with_its_local_ranks(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        moe:
          model: Qwen/Qwen3-30B-A3B
          node: pair
          replicas: 4
          tensor_parallel: 4
          port: 8000
          data_parallel: {mode: vllm-hybrid, expert_parallel: true}
        """)
    assert [(s.name, s.host, s.gpus, s.ranks) for s in launch.processes] == [
        ("moe/0", "10.0.0.1", tuple(range(8)), (0, 1)), ("moe/1", "10.0.0.2", tuple(range(8)), (2, 3))]
    assert list(launch.by_name("moe/1").argv)[7:] == [
        "--tensor-parallel-size", "4", "--data-parallel-size", "4", "--data-parallel-size-local", "2",
        "--data-parallel-start-rank", "2", "--data-parallel-address", "10.0.0.1", "--data-parallel-rpc-port",
        "29550", "--data-parallel-hybrid-lb", "--enable-expert-parallel"]


def test_pipeline_stages_across_hosts_run_through_ray(tmp_path: Path) -> None:
    launch = _plan(tmp_path, """\
        big: {model: meta-llama/Llama-3.1-405B, node: pair, tensor_parallel: 8, pipeline_parallel: 2, port: 8100,
              vllm_command: [/venv/bin/vllm], ray: {port: 7000, worker_ports: 16}}
        """)
    assert [(s.name, s.role, s.node, s.port, s.gpus, s.stages, s.kind) for s in launch.processes] == [
        ("big/ray0", "ray-head", "pair@0", 7000, tuple(range(8)), (0,), "ray"),
        ("big/0", "server", "pair@0", 8100, tuple(range(8)), (0, 1), "vllm"),
        ("big/ray1", "ray-worker", "pair@1", 7008, tuple(range(8)), (1,), "ray")]
    head, server, worker = launch.processes
    assert list(head.argv) == [
        "/venv/bin/ray", "start", "--block", "--disable-usage-stats", "--node-ip-address", "10.0.0.1", "--head",
        "--port", "7000", "--ray-client-server-port", "7001", "--include-dashboard", "false",
        "--node-manager-port", "7002", "--object-manager-port", "7003", "--metrics-export-port", "7004",
        "--dashboard-agent-grpc-port", "7005", "--dashboard-agent-listen-port", "7006",
        "--runtime-env-agent-port", "7007", "--min-worker-port", "7014", "--max-worker-port", "7029",
        "--num-gpus", "8"]
    assert list(worker.argv[6:8]) == ["--address", "10.0.0.1:7000"]
    assert list(worker.argv[-6:]) == ["--min-worker-port", "7030", "--max-worker-port", "7045", "--num-gpus", "8"]
    assert server.argv[:2] == ("sh", "-c") and server.argv[3:server.gate] == (
        GATE_NAME, "/venv/bin/ray", "2", "10.0.0.1:7000", "900", "--")
    assert list(server.engine_argv) == [
        "/venv/bin/vllm", "serve", "meta-llama/Llama-3.1-405B", "--host", "0.0.0.0", "--port", "8100",
        "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray"]
    assert endpoints_for(launch) == {"meta-llama/Llama-3.1-405B": [{"ip_addr": "10.0.0.1", "port": 8100}]}


def test_a_ray_cluster_on_this_machine_binds_the_nodes_loopback_address(tmp_path: Path) -> None:
    """Ray turns 127.0.0.1 into the machine's outward address, so a loopback cluster binds another one."""
    nodes = NODES.replace("pair: {hosts: [10.0.0.1, 10.0.0.2], gpus: 8}", "pair: {hosts: [localhost, 127.0.0.2], "
                          "gpus: 0, bind: 127.0.0.3}")
    path = tmp_path / "big.yaml"
    path.write_text(nodes + "  big: {model: /m/tiny, node: pair, gpus_per_replica: 0, pipeline_parallel: 2, "
                    "port: 8100}\n")
    launch = plan(load_topology(path), state_dir="/state/big")
    head, server, worker = launch.processes
    assert [(s.host, s.bind_host) for s in launch.processes] == [("127.0.0.3", "127.0.0.3"),
                                                                 ("127.0.0.3", "127.0.0.3"),
                                                                 ("127.0.0.2", "127.0.0.2")]
    assert head.argv[4:6] == ("--node-ip-address", "127.0.0.3")
    assert worker.argv[4:8] == ("--node-ip-address", "127.0.0.2", "--address", "127.0.0.3:6379")
    assert server.argv[server.gate - 3] == "127.0.0.3:6379"  # the gate counts at the head
    assert (head.env["VLLM_CPU_OMP_THREADS_BIND"], server.env["VLLM_CPU_OMP_THREADS_BIND"],
            worker.env["VLLM_CPU_OMP_THREADS_BIND"]) == ("0", "0", "0")  # one rank per host, each host's core 0
    assert endpoints_for(launch) == {"/m/tiny": [{"ip_addr": "127.0.0.3", "port": 8100}]}


IMPOSSIBLE: list[tuple[str, str, list[str]]] = [
    ("ranks × TP × PP over the node's GPUs",
     "a: {model: m, node: gpu8, replicas: 3, tensor_parallel: 2, pipeline_parallel: 2, port: 9000}\n",
     ["7: models.a.replicas: 3 ranks × TP 2 × PP 2 need 12 GPUs on host 'gpu8' of node 'gpu8', which has 8 GPUs "
      "(8 free)"]),
    ("internal DP over the GPUs",
     "a: {model: m, node: gpu8, replicas: 4, tensor_parallel: 4, port: 9000, data_parallel: {mode: vllm-internal}}\n",
     ["7: models.a.replicas: 4 ranks × TP 4 × PP 1 need 16 GPUs on host 'gpu8' of node 'gpu8', which has 8 GPUs "
      "(8 free)"]),
    ("stages that do not split over the hosts",
     "a: {model: m, node: pair, tensor_parallel: 2, pipeline_parallel: 3, port: 9000}\n",
     ["7: models.a.pipeline_parallel: 3 pipeline stages cannot be split evenly over the 2 hosts of node 'pair' "
      "(2 hosts) (tensor parallel stays inside a host; stages go across hosts): use pipeline_parallel: 2 or a "
      "multiple"]),
    ("a Ray group with replicas",
     "a: {model: m, node: pair, replicas: 2, pipeline_parallel: 2, port: 9000}\n",
     ["7: models.a.replicas: a model whose stages span the 2 hosts of node 'pair' (2 hosts) runs one TP×PP group "
      "(one Ray cluster); replicas: 2 would need one cluster each: declare a model per group, or use data_parallel "
      "mode vllm-hybrid/vllm-external with each rank on one host"]),
    ("hybrid on a single host",
     "a: {model: m, node: gpu8, replicas: 2, port: 9000, data_parallel: {mode: vllm-hybrid}}\n",
     ["7: models.a.data_parallel.mode: vllm-hybrid runs one API server per host, and node 'gpu8' is one host; use "
      "vllm-internal (one server, one endpoint) or vllm-external (one server per rank)"]),
    ("internal DP across hosts",
     "a: {model: m, node: pair, replicas: 2, port: 9000, data_parallel: {mode: vllm-internal}}\n",
     ["7: models.a.data_parallel.mode: vllm-internal runs on one host and node 'pair' (2 hosts) spans 2: use "
      "vllm-hybrid (one API server per host) or vllm-external (one server per rank)"]),
    ("ranks that do not split over the hosts",
     "a: {model: m, node: pair, replicas: 3, port: 9000, data_parallel: {mode: vllm-external}}\n",
     ["7: models.a.replicas: 3 data-parallel ranks cannot be split evenly over the 2 hosts of node 'pair' "
      "(2 hosts): use a multiple of 2"]),
    ("expert parallel without vLLM's DP",
     "a: {model: m, node: gpu8, replicas: 2, port: 9000, data_parallel: {expert_parallel: true}}\n",
     ["7: models.a.data_parallel.expert_parallel: expert parallelism needs vLLM's own data parallelism (the ranks "
      "step together): set data_parallel.mode to vllm-internal, vllm-hybrid or vllm-external"]),
    ("gpus_per_replica that contradicts TP × PP",
     "a: {model: m, node: gpu8, gpus_per_replica: 2, tensor_parallel: 2, pipeline_parallel: 2, port: 9000}\n",
     ["7: models.a.gpus_per_replica: 2 GPUs per replica, but tensor_parallel × pipeline_parallel = 2 × 2 = 4 "
      "(leave gpus_per_replica out: it follows from them)"]),
    ("two plans on one DP port",
     "a: {model: m, node: gpu8, replicas: 2, port: 9000, data_parallel: {mode: vllm-internal}}\n"
     "b: {model: m2, node: gpu8, replicas: 2, port: 9100, data_parallel: {mode: vllm-internal}}\n",
     ["8: models.b.data_parallel.rpc_port: port 29550 on host gpu-box is also used by models.a (its data-parallel "
      "RPC port)"]),
    ("a Ray port on a server's port",
     "a: {model: m, node: pair, pipeline_parallel: 2, port: 9003, ray: {port: 9000}}\n",
     ["7: models.a.ray.port: port 9003 is planned twice for models.a: server a/0 and Ray node a/ray0"]),
    ("two Ray clusters on one port",
     "a: {model: m, node: pair, pipeline_parallel: 2, port: 9500}\n"
     "b: {model: m2, node: pair, pipeline_parallel: 2, port: 9600}\n",
     ["8: models.b.ray.port: port 6379 on host 10.0.0.1 is also used by models.a (Ray node a/ray0)"]),
    ("vLLM's DP across the nodes of a slurm job",
     "a: {model: m, node: alloc, replicas: 2, port: 9000, data_parallel: {mode: vllm-external}}\n",
     ["8: models.a.data_parallel.mode: node 'alloc' (2 hosts) is a slurm allocation of 2 nodes: vLLM's own data "
      "parallelism across a job's nodes is not planned in this version (stages across them through Ray are); use a "
      "`hosts:` node"]),
]


@pytest.mark.parametrize(("what", "models", "expected"), IMPOSSIBLE, ids=[case[0] for case in IMPOSSIBLE])
def test_impossible_shapes_are_located_errors(tmp_path: Path, what: str, models: str, expected: list[str]) -> None:
    nodes = NODES
    if "alloc" in models:
        nodes = NODES.replace("models:\n", "  alloc: {slurm: {gpus: 8, nodes: 2}}\nmodels:\n")
    assert _errors(tmp_path, models, nodes) == expected


def test_a_hosts_node_lists_each_machine_once(tmp_path: Path) -> None:
    nodes = NODES.replace("[10.0.0.1, 10.0.0.2]", "[localhost, 127.0.0.1]")
    assert _errors(tmp_path, "a: {model: m, node: gpu8, port: 9000}\n", nodes) == [
        "4: nodes.pair.hosts: this machine is listed twice (localhost, 127.0.0.1 and ::1 are one machine)"]


def test_a_service_on_a_node_of_several_hosts_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(NODES + "  a: {model: m, node: gpu8, port: 9000}\nservices:\n  r: {kind: retrieval, node: pair, "
                    "port: 8765}\n")
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert [line.split("big.yaml:", 1)[1] for line in info.value.problems] == [
        "9: services.r.node: node 'pair' spans 2 hosts; a service runs on one host (a node with host:)"]


def test_flags_the_layout_sets_are_refused_in_engine_args(tmp_path: Path) -> None:
    assert _errors(tmp_path, "a: {model: m, node: gpu8, port: 9000, engine_args: [--data-parallel-size, '2']}\n") == [
        "7: models.a.engine_args.0: '--data-parallel-size' is set from the topology; use replicas with "
        "data_parallel.mode instead"]


VLLM = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "vllm"


@pytest.mark.vllm
@pytest.mark.timeout(900)
@pytest.mark.skipif(not VLLM.is_file(), reason="needs .venv-vllm/bin/vllm (make setup)")
def test_every_modes_golden_argv_is_accepted_by_vllms_own_parser(tmp_path: Path) -> None:
    """The argv check `ops up` runs (real vLLM's parser and pre-launch validation) on each mode's servers."""
    from orchestra_ops.fleet.argv_check import check_specs
    from orchestra_ops.fleet.argv_check_nodes import run_here

    launch = _plan(tmp_path, f"""\
        tp: {{model: org/A-70B, node: gpu8, replicas: 1, tensor_parallel: 2, pipeline_parallel: 2, port: 8000,
              vllm_command: [{VLLM}]}}
        internal: {{model: org/MoE, node: gpu8, replicas: 2, port: 8100, vllm_command: [{VLLM}],
                    data_parallel: {{mode: vllm-internal, expert_parallel: true}}}}
        external: {{model: org/MoE2, node: pair, replicas: 2, port: 8200, vllm_command: [{VLLM}],
                    data_parallel: {{mode: vllm-external, expert_parallel: true}}}}
        hybrid: {{model: org/MoE3, node: pair, replicas: 4, port: 8300, vllm_command: [{VLLM}],
                  data_parallel: {{mode: vllm-hybrid, expert_parallel: true, rpc_port: 13400}}}}
        ray: {{model: org/Big, node: pair, tensor_parallel: 2, pipeline_parallel: 2, port: 8400,
               vllm_command: [{VLLM}], ray: {{port: 7000}}}}
        """)
    servers = [s for s in launch.processes if s.serves]
    runners = dict.fromkeys(("gpu8", "pair@0", "pair@1"), run_here(tmp_path))  # all on this machine, as `ops up`
    checks = check_specs(servers, runners, first_per_model=False)  # every server, in one vLLM process
    assert {c.group: (c.ok, c.error) for c in checks} == {
        "tp": (True, None), "internal": (True, None), "external": (True, None), "hybrid": (True, None),
        "ray": (True, None)}
    assert {c.version for c in checks} == {"0.32.0+cpu"}


def test_stages_across_the_nodes_of_one_slurm_job_run_through_ray_in_that_job(tmp_path: Path) -> None:
    """One sbatch job of 2 nodes: Ray's head and the server on the batch host, the worker on the second node
    through srun; the head's address is the job's first node, filled in when the job runs."""
    import subprocess

    from orchestra_ops.fleet.backends.sbatch import Replica, SbatchJob, parse_hosts, render_sbatch

    nodes = NODES.replace("models:\n", "  alloc: {slurm: {gpus: 4, nodes: 2}}\nmodels:\n")
    path = tmp_path / "big.yaml"
    path.write_text(nodes + "  big: {model: org/Big, node: alloc, tensor_parallel: 4, pipeline_parallel: 2, "
                    "port: 8100, ray: {port: 7000, worker_ports: 8}}\n")
    topology = load_topology(path)
    launch = plan(topology, state_dir="/state/big")
    assert [(s.name, s.node, s.host, s.host_index, s.gpus) for s in launch.processes] == [
        ("big/ray0", "alloc", None, 0, (0, 1, 2, 3)), ("big/0", "alloc", None, 0, (0, 1, 2, 3)),
        ("big/ray1", "alloc", None, 1, (0, 1, 2, 3))]
    head, server, worker = launch.processes
    assert "--node-ip-address" not in head.argv  # Ray finds each node's own address in the job
    assert worker.argv[4:6] == ("--address", "@OPS_JOB_HEAD@:7000")
    assert server.argv[server.gate - 3] == "@OPS_JOB_HEAD@:7000"
    job = SbatchJob(topology="big", node="alloc", settings=topology.nodes["alloc"].slurm, nofile=4096,  # type: ignore[arg-type]
                    job_log="/l/alloc.slurm.log", workdir="/w",
                    replicas=tuple(Replica(s.name, f"/l/{s.name.replace('/', '-')}.log", s.gpus, dict(s.env),
                                           list(s.argv), None, s.host_index) for s in launch.processes))
    script = render_sbatch(job)
    assert "#SBATCH --nodes=2" in script and "#SBATCH --ntasks=2" in script
    assert 'echo "ops-job: hosts ${ops_hosts[*]}"' in script
    starts = [line for line in script.splitlines() if line.startswith(("ops_start ", "ops_start_on "))]
    assert [line.split()[:2] for line in starts] == [["ops_start", "big/ray0"], ["ops_start", "big/0"],
                                                    ["ops_start_on", "1"]]
    assert starts[2].split()[2] == "big/ray1" and "--address ${ops_head}:7000" in starts[2]
    assert "' ops-ray-gate ray 2 ${ops_head}:7000 900 -- vllm serve org/Big " in script  # the gate counts at the head
    checked = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert checked.returncode == 0, checked.stderr
    assert parse_hosts("ops-job: hosts n1 n2") == ["n1", "n2"] and parse_hosts("ops-job: started x") is None


def test_ray_on_a_one_host_model_is_a_one_node_cluster_kept_on_loopback(tmp_path: Path) -> None:
    launch = _plan(tmp_path, "r: {model: /m, node: gpu8, tensor_parallel: 4, port: 9000, ray: {port: 7000}}\n")
    head, server = launch.processes
    assert (head.name, head.role, head.gpus, server.name, server.gpus) == ("r/ray0", "ray-head", (0, 1, 2, 3), "r/0",
                                                                          (0, 1, 2, 3))
    assert head.argv[4:6] == ("--node-ip-address", "127.0.0.1")
    assert server.argv[server.gate - 4:server.gate - 1] == ("1", "127.0.0.1:7000", "900")
    assert head.env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == server.env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert server.engine_argv[-2:] == ("--distributed-executor-backend", "ray")
