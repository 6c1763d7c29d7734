"""The original harness's pattern for the agent benchmark (ToolOrchestra's eval_hle_oss.py, reduced).

`run_all` gates tasks with an asyncio semaphore over a ThreadPoolExecutor of blocking task bodies;
each round of a task builds a fresh event loop (`asyncio.run`) with its own thread pool to run the
tool; every model call builds a new OpenAI client for a replica chosen at random; retrieval is a
blocking POST; code runs as `subprocess.run([python, file], timeout=60)`. The prompts,
tools and sims are the same as the ops run's, so the sims follow the same plan.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
from orchestra_ops.evals.agent import grading

from orchestra_ops.runner.templates import Template


class Baseline:
    def __init__(self, endpoints: dict[str, list[tuple[str, int]]], templates: dict[str, Template],
                 tools: list[dict[str, Any]], python: str) -> None:
        self.endpoints = endpoints
        self.t = templates
        self.tools = tools
        self.python = python
        self.workdir = Path(tempfile.mkdtemp(prefix="baseline-"))

    def call(self, model: str, messages: list[dict[str, Any]], **params: Any) -> Any:
        host, port = random.choice(self.endpoints[model])  # a random replica per call, a new client per call
        client = openai.OpenAI(base_url=f"http://{host}:{port}/v1", api_key="EMPTY", timeout=600, max_retries=0)
        return client.chat.completions.create(model=model, messages=messages, **params)  # type: ignore[arg-type]

    def context(self, docs: list[str], code: list[tuple[str, str]]) -> str:
        text = "".join(f"Doc {i + 1}: {d[:1200]} ...\n\n" for i, d in enumerate(docs))
        code_text = "".join(f"```python\n{c}\n```\n\n```output\n{o}\n```\n\n" for c, o in code)
        if code_text:
            text += "\npython code and execution outputs:\n" + code_text
        return ("Documents:\n" + text) if docs else text

    def tool(self, args: dict[str, Any]) -> dict[str, Any]:
        name, q, ctx = args["tool"], args["problem"], args["context"]
        if name == "search":
            prompt = self.t["query_writer"].render(context=ctx, problem=q)
            reply = self.call("search", [{"role": "user", "content": prompt}], temperature=0.2, max_tokens=8000)
            query = (reply.choices[0].message.content or "").split("<query>")[-1].split("</query>")[0]
            host, port = random.choice(self.endpoints["retrieval"])
            hits = httpx.post(f"http://{host}:{port}/retrieve", json={"queries": [query[:390]], "topk": 50,
                                                                      "return_scores": True, "eid": args["id"]},
                              timeout=httpx.Timeout(60, connect=3)).json()
            args["docs"] = [h["document"]["content"] for h in hits[0]]
        elif name == "enhance_reasoning":
            prompt = self.t["code_writer"].render(context=ctx, problem=q)
            reply = self.call("reasoner", [{"role": "user", "content": prompt}], temperature=0.2, max_tokens=8000)
            code = (reply.choices[0].message.content or "").split("```python")[-1].split("```")[0]
            path = self.workdir / f"exec_{args['id']}_{args['step']}.py"
            path.write_text(code)
            try:
                args["output"] = subprocess.run([self.python, str(path)], timeout=60, capture_output=True,
                                                text=True).stdout
            except subprocess.TimeoutExpired:
                args["output"] = ""
            args["code"] = code
        else:
            prompt = self.t["answerer"].render(context=ctx, problem=q) + "\n" + self.t["answer_tag"].text
            reply = self.call("answer", [{"role": "user", "content": prompt}], temperature=0.2, max_tokens=8000,
                              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
            pred = grading.extract(reply.choices[0].message.content or "", "answer")
            quick = grading.shortcut(pred, args["answer"])
            if quick is None:
                verdict = self.call("judge", [{"role": "user", "content": self.t["judge"].render(
                    question=q, pred=pred, gold=args["answer"])}], temperature=1, max_completion_tokens=16384)
                args["correct"] = grading.parse_correct(verdict.choices[0].message.content) is True
            else:
                args["correct"] = quick[0]
        return args

    def run_single(self, sample: dict[str, Any]) -> dict[str, Any]:
        docs: list[str] = []
        code: list[tuple[str, str]] = []
        system = self.t["orchestrator_system"].text
        for step in range(50):
            prompt = self.t["orchestrator"].render(problem=sample["question"], context=self.context(docs, code))
            reply = self.call("orchestrator", [{"role": "system", "content": system},
                                               {"role": "user", "content": prompt}],
                              tools=self.tools, temperature=1, max_tokens=12000)
            calls = reply.choices[0].message.tool_calls or []
            if not calls:
                continue
            name = calls[0].function.name
            args = {"tool": name, "problem": sample["question"], "answer": sample["answer"], "id": sample["id"],
                    "step": step, "context": self.context(docs, code).strip(),
                    "model": json.loads(calls[0].function.arguments).get("model")}
            result = asyncio.run(run_all([(self.tool, args)]))[0]  # a fresh event loop and pool per round
            if name == "answer":
                return {"id": sample["id"], "correct": result["correct"], "rounds": step + 1}
            if name == "search":
                for doc in result["docs"][::-1]:
                    if doc not in docs:
                        docs.append(doc)
            elif result["output"].strip():
                code.append((result["code"], result["output"]))
        return {"id": sample["id"], "correct": False, "rounds": 50}


async def run_all(task_list: Iterable[tuple[Callable[[Any], Any], Any]], concurrency: int = 2) -> list[Any]:
    """The original's helper: a semaphore over a ThreadPoolExecutor of blocking calls."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    with ThreadPoolExecutor(max_workers=concurrency) as executor:
        async def one(func: Callable[[Any], Any], arg: Any) -> Any:
            async with gate:
                try:
                    return await loop.run_in_executor(executor, func, arg)
                except Exception as exc:  # the original keeps going (return_exceptions)
                    return exc

        return list(await asyncio.gather(*(one(f, a) for f, a in task_list)))
