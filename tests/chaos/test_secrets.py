"""Secrets in errors: a provider whose answers echo the key it was sent. The key's value must appear in
no file under the run dir (results, profile, eval.log, run.json, scores, analysis) and not on the console."""

from __future__ import annotations

import json
import secrets
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from orchestra_ops.evals.agent.records import write_trajectory

from orchestra_ops.core.redact import Redactor, install, redact
from tests.helpers import run_ops
from tests.integration.eval_fixtures import results

MARK = "[redacted $CHAOS_PROVIDER_KEY]"


class EchoKey(BaseHTTPRequestHandler):
    """An OpenAI-like provider that puts the Authorization header it got into every answer: a 401 for
    prompts that say `deny`, a 500 for `fail`, else a 200 whose content quotes it."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        auth = self.headers.get("Authorization", "")
        prompt = body["messages"][-1]["content"]
        if "deny" in prompt:
            self._reply(401, {"error": {"message": f"Incorrect API key provided: {auth}", "type": "auth"}})
        elif "fail" in prompt:
            self._reply(500, {"error": {"message": f"upstream broke while serving key {auth}"}})
        else:
            self._reply(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                              "choices": [{"index": 0, "finish_reason": "stop",
                                           "message": {"role": "assistant", "content": f"you sent {auth}"}}],
                              "usage": {"prompt_tokens": 3, "completion_tokens": 4}})

    def _reply(self, status: int, data: dict[str, object]) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def provider() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join()


TOPOLOGY = """\
name: secrettopo
backend: local
nodes:
  cpu: {host: localhost, gpus: 0}
models: {}
providers:
  ext: {kind: openai, model: gpt-x, base_url: "http://127.0.0.1:PORT/v1", api_key_env: CHAOS_PROVIDER_KEY}
roles:
  responder: ext
"""


def test_a_provider_that_echoes_the_key_leaks_it_nowhere(tmp_path: Path, provider: int) -> None:
    key = f"sk-chaos-{secrets.token_hex(16)}"
    topology = tmp_path / "topo.yaml"
    topology.write_text(textwrap.dedent(TOPOLOGY).replace("PORT", str(provider)))
    home = tmp_path / "ops"
    (home / "secrettopo").mkdir(parents=True)
    (home / "secrettopo" / "model_config.json").write_text("{}")
    ids = [f"deny-{i}" for i in range(4)] + [f"fail-{i}" for i in range(2)] + [f"ok-{i}" for i in range(4)]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": i, "prompt": f"please {i}"}) + "\n" for i in ids))
    run_dir = tmp_path / "run"
    env = {"OPS_HOME": str(home), "CHAOS_PROVIDER_KEY": key}
    proc = run_ops(["-vv", "eval", "chat", "--topology", str(topology), "--model", "responder", "--dataset", str(data),
                    "--run-dir", str(run_dir), "--max-retries", "2"], env=env)  # with the analysis at the end
    assert proc.returncode == 0, proc.stderr

    by_id = {r["id"]: r for r in results(run_dir)}
    assert sorted(by_id) == sorted(ids)
    assert by_id["deny-0"]["error"] == f"http://127.0.0.1:{provider}/v1 answered 401: Incorrect API key provided: " \
                                       f"Bearer {MARK}"  # the answer came back, without the key
    assert by_id["fail-0"]["error_type"] == "http_500" and MARK in by_id["fail-0"]["error"]
    assert by_id["ok-0"]["answer"] == f"you sent Bearer {MARK}"
    assert (run_dir / "analysis" / "report.html").is_file()

    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"results.jsonl", "profile.jsonl", "eval.log", "run.json", "scores.json", "report.html"} <= \
        {p.name for p in files}
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    assert MARK in (run_dir / "profile.jsonl").read_text()
    assert key not in proc.stdout and key not in proc.stderr
    export = run_ops(["eval-status", str(run_dir), "--json"], env=env)
    assert export.returncode == 0 and key not in export.stdout


def test_trajectories_and_short_values(tmp_path: Path) -> None:
    """Trajectories go through the choke point too; values under 8 characters are not redacted."""
    key = "sk-trajectory-0123456789"
    install(Redactor({"CHAOS_PROVIDER_KEY": key, "SHORT": "abc"}))
    try:
        relative = write_trajectory(tmp_path / "trajectories", "t1",
                                    {"rounds": [{"error": f"401: bad key {key}", "text": "abc \"" + key + "\""}]})
        written = (tmp_path / relative).read_text()
        assert key not in written and written.count(MARK) == 2 and "abc" in written
        assert redact(json.dumps(f"quote\"{key}")) == json.dumps(f"quote\"{MARK}")
    finally:
        install(Redactor())
