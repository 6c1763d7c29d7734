"""Cross-check `ops eval tau2` against τ²-bench's own evaluator (a dev tool; not run by `make test`/CI).

For one domain of a real τ²-bench data dir it
1. derives a task file from the domain's tasks: each task's user instructions get the sim's directives
   (services/simllm/tau2_rules.py) that replay the gold actions ([sim:call …] for the agent's,
   [sim:user_call …] for the user's) and say every communicate_info ([sim:say …]), plus wrong variants
   of each task: `ID~drop` (the last action left out), `ID~arg` (one argument of the last action with
   arguments changed), `ID~nosay` (the first communicate_info not said), and where NL_ASSERTION is in
   the basis `ID~nl` (two NL assertions added, one the sim judge finds met, one not), so that rewards
   1 and 0 occur;
2. runs `ops eval tau2 --domain D --data-dir DATA/tau2 --task-file …` against three sim servers (agent,
   user simulator, judge) and `ops export --format tau2`;
3. loads that file with τ²-bench's own `Results` model (any field it rejects is a bug of our export)
   and runs `tau2 evaluate-trajs FILE -o OUT` (its exit status is reported), then grades every
   simulation with the same call evaluate-trajs makes (`evaluate_simulation`, EvaluationType.ALL,
   strict_replay=False), one by one, so that one that raises is reported alone, and once more with
   strict_replay=True as a live `tau2 run` does (every replayed write must return the content of our
   recorded tool message, so our tools' outputs are checked too); the NL-assertion
   judge (LiteLLM, model gpt-4.1-2025-04-14) is pointed at the judge sim through OPENAI_BASE_URL;
4. drives `tau2 view --file FILE` through its menus (stdin) to see that τ²-bench's viewer shows it;
5. compares every simulation's reward and reward_info parts (db match, action checks, env assertions,
   communicate checks, NL assertions, breakdown) with ours, and prints a table.

Set up τ²-bench (MIT; never copied into this repo), Python >= 3.12, everything under /tmp:

    R=/work/.mirror/sierra-research+tau2-bench/repo
    # the mirror lacks some LFS blobs (airline/db.json, telecom/tasks.json, …): leave those out
    git -C $R ls-tree -r HEAD | awk '{print $3, $4}' > /tmp/tau2tree.txt
    git -C $R cat-file --batch-check < <(awk '{print $1}' /tmp/tau2tree.txt) | awk '/missing/{print $1}' \\
        | sort -u > /tmp/missing.txt
    mkdir -p /tmp/tau2src && git -C $R archive HEAD -- . $(grep -Ff /tmp/missing.txt /tmp/tau2tree.txt \\
        | awk '{print ":(exclude)"$2}' | sort -u) | tar -x -C /tmp/tau2src
    /root/.pyenv/versions/3.12.1/bin/python -m venv /tmp/tau2venv && /tmp/tau2venv/bin/pip install /tmp/tau2src

airline's db.json (blob c6a1e81) is absent from every mirror here: put a db.json at
/tmp/tau2src/data/tau2/domains/airline/ first (both graders then read the same file); telecom: pass
--tasks-name tasks_small.json (tasks.json is an LFS pointer too).

Then, from the repo root:

    .venv/bin/python scripts/tau2_crosscheck.py --domain mock --tau2-data /tmp/tau2src/data \\
        --tau2-python /tmp/tau2venv/bin/python --work /tmp/tau2x-mock

Exit status 0 when every simulation agrees and τ²-bench loads the file, 1 otherwise.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import run_ops  # noqa: E402
from tests.integration.agent_fixtures import write_fleet  # noqa: E402
from tests.simserver import SimServer  # noqa: E402

JUDGE_MODEL = "gpt-4.1-2025-04-14"  # τ²-bench's DEFAULT_LLM_NL_ASSERTIONS
VARIANTS = ("drop", "arg", "nosay")
LOAD_CHECK = """
import json, sys
from pydantic import ValidationError
from tau2.data_model.simulation import Results
try:
    Results.load(sys.argv[1])
except ValidationError as exc:
    print(json.dumps([{"loc": list(map(str, e["loc"])), "msg": e["msg"]} for e in exc.errors()]))
    sys.exit(3)
print("[]")
"""
# compute_simulation_rewards of `tau2 evaluate-trajs`, one simulation at a time, so that a simulation
# whose evaluation raises is reported as such instead of failing the whole file
GRADE = """
import json, sys
from tau2.data_model.simulation import Results
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.scripts.evaluate_trajectories import _build_eval_env_kwargs, get_communication_mode, is_solo_mode
results = Results.load(sys.argv[1])
domain = results.info.environment_info.domain_name
tasks = {task.id: task for task in results.tasks}
graded = {}
for simulation in results.simulations:
    task = tasks[simulation.task_id]
    try:
        info = evaluate_simulation(domain=domain, task=task, simulation=simulation,
                                   evaluation_type=EvaluationType.ALL, solo_mode=is_solo_mode(results),
                                   mode=get_communication_mode(results, simulation),
                                   env_kwargs=_build_eval_env_kwargs(domain, task), strict_replay=False)
        graded[simulation.id] = {"reward_info": info.model_dump(mode="json")}
    except Exception as exc:
        graded[simulation.id] = {"raised": f"{type(exc).__name__}: {exc}"}
        continue
    if sys.argv[3] == "1":  # live tau2 replays strictly: a write must return what the recording holds
        try:
            evaluate_simulation(domain=domain, task=task, simulation=simulation,
                                evaluation_type=EvaluationType.ENV, solo_mode=is_solo_mode(results),
                                mode=get_communication_mode(results, simulation),
                                env_kwargs=_build_eval_env_kwargs(domain, task), strict_replay=True)
        except Exception as exc:
            graded[simulation.id]["strict_replay"] = f"{type(exc).__name__}: {exc}"[:600]
json.dump(graded, open(sys.argv[2], "w"), indent=1)
"""


def directives(actions: list[dict[str, Any]], says: list[str]) -> str:
    parts = []
    for action in actions:
        kind = "user_call" if action.get("requestor") == "user" else "call"
        parts.append(f"[sim:{kind} {action['name']} {json.dumps(action.get('arguments') or {})}]")
    parts += [f"[sim:say {text}]" for text in says]
    return " ".join(parts)


def with_directives(task: dict[str, Any], text: str) -> dict[str, Any]:
    out = copy.deepcopy(task)
    instructions = out["user_scenario"]["instructions"]
    if isinstance(instructions, str):
        out["user_scenario"]["instructions"] = f"{instructions} {text}"
    else:
        instructions["task_instructions"] = f"{instructions.get('task_instructions') or ''} {text}".strip()
    return out


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, list):
        return [*value[:-1], changed(value[-1])] if value else ["x"]
    return f"{value}x"


def derive(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The task with gold directives, then its wrong variants (where the task allows them)."""
    criteria = task.get("evaluation_criteria") or {}
    actions = list(criteria.get("actions") or [])
    says = [s for s in criteria.get("communicate_info") or [] if "[" not in s and "]" not in s]
    derived = [with_directives(task, directives(actions, says))]
    if actions:
        variant = with_directives(task, directives(actions[:-1], says))
        derived.append(variant | {"id": f"{task['id']}~drop"})
    with_args = [i for i, a in enumerate(actions) if a.get("arguments")]
    if with_args:
        wrong = copy.deepcopy(actions)
        arguments = wrong[with_args[-1]]["arguments"]
        key = sorted(arguments)[0]
        arguments[key] = changed(arguments[key])
        derived.append(with_directives(task, directives(wrong, says)) | {"id": f"{task['id']}~arg"})
    if says:
        derived.append(with_directives(task, directives(actions, says[1:])) | {"id": f"{task['id']}~nosay"})
    if "NL_ASSERTION" in (criteria.get("reward_basis") or []):
        # the sim judge meets an outcome iff its 'quoted' phrases were said by the agent: one said, one not
        said = f"confirmation {task['id']}"
        judged = with_directives(task, directives(actions, [*says, said])) | {"id": f"{task['id']}~nl"}
        judged["evaluation_criteria"] = {**criteria, "nl_assertions": [
            *(criteria.get("nl_assertions") or []), f"The agent gives the '{said}' reference.",
            "The agent says 'this phrase is never said'."]}
        derived.append(judged)
    return derived


def parts(info: dict[str, Any] | None) -> dict[str, Any]:
    """The comparable parts of a RewardInfo (ours or τ²-bench's, as JSON)."""
    info = info or {}

    def mets(key: str, field: str = "met") -> list[Any] | None:
        items = info.get(key)
        return None if items is None else [item.get(field) for item in items]

    return {"reward": info.get("reward"),
            "db_match": (info.get("db_check") or {}).get("db_match"),
            "actions": mets("action_checks", "action_match"),
            "env_assertions": mets("env_assertions"),
            "communicate": mets("communicate_checks"),
            "nl": mets("nl_assertions"),
            "breakdown": info.get("reward_breakdown") or None}


def differences(ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    a, b = parts(ours), parts(theirs)
    out = []
    for key in a:
        left, right = a[key], b[key]
        if key in ("env_assertions", "communicate", "nl", "actions") and not left and not right:
            continue  # [] and None both mean "nothing checked"
        if left != right:
            out.append(f"{key}: ours {left} theirs {right}")
    return out


def run(args: argparse.Namespace) -> int:
    domain_dir = Path(args.tau2_data) / "tau2" / "domains" / args.domain
    tasks = json.loads((domain_dir / args.tasks_name).read_text())
    if args.limit:
        tasks = tasks[: args.limit]
    prefilled = [t["id"] for t in tasks if ((t.get("initial_state") or {}).get("message_history"))]
    if prefilled:  # ops eval tau2 refuses these (ConfigError), so they are left out here
        print(f"left out, a prefilled message_history: {', '.join(prefilled)}")
        tasks = [t for t in tasks if t["id"] not in prefilled]
    work = Path(args.work or tempfile.mkdtemp(prefix=f"tau2x-{args.domain}-"))
    work.mkdir(parents=True, exist_ok=True)
    derived = [d for task in tasks for d in derive(task)]
    task_file = work / "tasks.json"
    task_file.write_text(json.dumps(derived, indent=1))
    nl_gated = sum(1 for t in tasks if (t.get("evaluation_criteria") or {}).get("nl_assertions"))
    print(f"{args.domain}: {len(tasks)} task(s) ({nl_gated} with nl_assertions) -> {len(derived)} derived "
          f"in {task_file}")
    home, run_dir, export = work / "ops", work / "run", work / "results.json"
    sims = [SimServer(name, args=["--latency-ms", "1"], log_dir=work)
            for name in ("sim/agent", "sim/user", JUDGE_MODEL)]
    try:
        for sim in sims:
            sim.start()
        agent, user, judge = sims
        topology = write_fleet(home, {"agent": (agent, {}), "usersim": (user, {}), "judge": (judge, {})},
                               {"orchestrator": "agent", "user": "usersim", "judge": "judge"}, name="tau2x")
        env = {"OPS_HOME": str(home)}
        evaluated = run_ops(["eval", "tau2", "--no-analyze", "--topology", str(topology), "--run-dir", str(run_dir),
                             "--domain", args.domain, "--data-dir", str(Path(args.tau2_data) / "tau2"),
                             "--task-file", str(task_file), "--concurrency", str(args.concurrency),
                             *(["--resume"] if (run_dir / "results.jsonl").exists() else [])],
                            env=env, timeout=3600)
        if evaluated.returncode != 0:
            print(evaluated.stdout[-2000:], evaluated.stderr[-3000:], sep="\n")
            return 1
        exported = run_ops(["export", str(run_dir), "--format", "tau2", "--out", str(export), "--overwrite"], env=env)
        if exported.returncode != 0:
            print(exported.stderr[-3000:])
            return 1
        tau2_env = {**os.environ, "TAU2_DATA_DIR": str(args.tau2_data), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    "OPENAI_API_KEY": "sk-sim", "OPENAI_BASE_URL": f"{judge.base_url}/v1",
                    "OPENAI_API_BASE": f"{judge.base_url}/v1"}
        loaded = subprocess.run([args.tau2_python, "-c", LOAD_CHECK, str(export)], env=tau2_env,
                                capture_output=True, text=True, check=False)
        rejected = json.loads(loaded.stdout.strip().splitlines()[-1]) if loaded.stdout.strip() else None
        if rejected is None or rejected:
            print(f"τ²-bench's Results model rejects {export}: {rejected or loaded.stderr[-2000:]}")
            return 1
        print(f"τ²-bench's Results model loads {export}")
        out_dir = work / "tau2-out"
        tau2_bin = str(Path(args.tau2_python).with_name("tau2"))
        cli = subprocess.run([tau2_bin, "evaluate-trajs", str(export), "-o", str(out_dir)], env=tau2_env,
                             capture_output=True, text=True, check=False, timeout=7200)
        (work / "evaluate-trajs.log").write_text(cli.stdout + cli.stderr)
        print(f"tau2 evaluate-trajs {export} -o {out_dir}: rc {cli.returncode}"
              + ("" if cli.returncode == 0 else " (the whole file fails when one simulation's evaluation raises)"))
        # `tau2 view`, driven through its menus on stdin: load the file, metrics, run configuration,
        # the first simulation, exit
        view = subprocess.run([tau2_bin, "view", "--file", str(export)], input="1\n1\n2\n5\n3\n1\n\n6\n",
                              env=tau2_env, capture_output=True, text=True, check=False, timeout=600)
        (work / "view.log").write_text(view.stdout + view.stderr)
        loaded_line = f"Loaded {len(json.loads(export.read_text())['simulations'])} simulations"
        viewed = view.returncode == 0 and loaded_line in view.stdout and "Error loading" not in view.stdout
        print(f"tau2 view --file {export}: {'shows it' if viewed else 'FAILED'} (see {work / 'view.log'})")
        graded_file = work / "tau2-graded.json"
        graded = subprocess.run([args.tau2_python, "-c", GRADE, str(export), str(graded_file),
                                 "0" if args.no_strict_replay else "1"], env=tau2_env,
                                capture_output=True, text=True, check=False, timeout=7200)
        if graded.returncode != 0:
            print(f"grading with τ²-bench failed: {graded.stderr[-3000:]}")
            return 1
    finally:
        for sim in sims:
            sim.stop()
    ours = {s["id"]: s for s in json.loads(export.read_text())["simulations"]}
    theirs = json.loads(graded_file.read_text())
    return report(args.domain, ours, theirs, work)


def report(domain: str, ours: dict[str, Any], theirs: dict[str, Any], work: Path) -> int:
    mismatches: list[tuple[str, list[str]]] = []
    equal_rewards = 0
    rewards = {0.0: 0, 1.0: 0}
    for sim_id, simulation in ours.items():
        other = theirs.get(sim_id)
        reward = (simulation.get("reward_info") or {}).get("reward")
        if reward in rewards:
            rewards[reward] += 1
        if other is None:
            mismatches.append((simulation["task_id"], ["absent from τ²-bench's output"]))
            continue
        if "raised" in other:
            mismatches.append((simulation["task_id"], [f"τ²-bench's evaluation raised {other['raised']}; "
                                                       f"ours: reward {reward}"]))
            continue
        ours_info, their_info = simulation.get("reward_info"), other.get("reward_info")
        if (ours_info or {}).get("reward") == (their_info or {}).get("reward"):
            equal_rewards += 1
        diff = differences(ours_info or {}, their_info or {})
        if "strict_replay" in other:
            diff.append(f"strict replay: {other['strict_replay']}")
        if diff:
            mismatches.append((simulation["task_id"], diff))
    print("\n| domain | simulations | reward 1 / 0 (ours) | equal rewards | reward_info mismatches |")
    print("|---|---|---|---|---|")
    print(f"| {domain} | {len(ours)} | {rewards[1.0]} / {rewards[0.0]} | {equal_rewards} | {len(mismatches)} |")
    for task_id, diff in sorted(mismatches):
        print(f"  {task_id}: {'; '.join(diff)}")
    (work / "mismatches.json").write_text(json.dumps(mismatches, indent=1))
    return 0 if not mismatches else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domain", required=True, choices=["mock", "airline", "retail", "telecom"])
    parser.add_argument("--tau2-data", required=True, help="τ²-bench's data dir (TAU2_DATA_DIR: holds tau2/domains)")
    parser.add_argument("--tau2-python", default="/tmp/tau2venv/bin/python", help="python of the τ²-bench venv")
    parser.add_argument("--tasks-name", default="tasks.json", help="the tasks file in the domain dir")
    parser.add_argument("--work", help="work dir (default: a new temp dir)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--no-strict-replay", action="store_true",
                        help="skip the second, strict replay (a replayed write returns what our tool message holds)")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
