"""A real headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for HTML tests.

`with HeadlessChromium(tmp_path) as browser: page = browser.open(url, expression)` loads the page,
evaluates `expression` in it (its JSON value comes back) and takes a full-page screenshot (PNG
bytes). The browser runs with its own profile dir under tmp_path and is stopped by pid.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
import httpx

from tests.helpers import kill_tree


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@dataclass
class PageResult:
    value: Any
    screenshot: bytes


class HeadlessChromium:
    def __init__(self, tmp_path: Path, width: int = 1280, height: int = 900) -> None:
        binary = chromium_path()
        if binary is None:
            raise RuntimeError("no chromium on PATH (scripts/install-system-deps.sh installs it)")
        self.profile = tmp_path / "chromium-profile"
        self.profile.mkdir(parents=True, exist_ok=True)
        (self.profile / "DevToolsActivePort").unlink(missing_ok=True)  # a stale one names a dead port
        self.log = open(tmp_path / "chromium.log", "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-extensions", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.port = self._wait_port()

    def _wait_port(self, timeout: float = 60.0) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}; see {self.log.name}")
            if marker.exists():
                lines = marker.read_text().splitlines()
                if lines and lines[0].isdigit():
                    return int(lines[0])
            time.sleep(0.05)
        raise TimeoutError(f"chromium did not open its DevTools port in {timeout} s")

    def open(self, url: str, expression: str, timeout: float = 60.0) -> PageResult:
        return asyncio.run(asyncio.wait_for(self._open(url, expression), timeout))

    async def _open(self, url: str, expression: str) -> PageResult:
        async with httpx.AsyncClient() as client:
            targets = (await client.get(f"http://127.0.0.1:{self.port}/json/list")).json()
        page = next(t for t in targets if t.get("type") == "page")
        async with aiohttp.ClientSession() as session, \
                session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            counter = 0

            async def call(method: str, **params: Any) -> dict[str, Any]:
                nonlocal counter
                counter += 1
                await ws.send_str(json.dumps({"id": counter, "method": method, "params": params}))
                while True:
                    message = json.loads((await ws.receive()).data)
                    if message.get("id") == counter:
                        if "error" in message:
                            raise RuntimeError(f"{method}: {message['error']}")
                        result: dict[str, Any] = message["result"]
                        return result

            await call("Page.enable")
            await call("Page.navigate", url=url)
            # the load event fires after every <img> (data: URIs included) has decoded
            for _ in range(600):
                state = await call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
                if state["result"].get("value") == "complete":
                    break
                await asyncio.sleep(0.05)
            value = await call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
            if "exceptionDetails" in value:
                raise RuntimeError(f"page expression failed: {value['exceptionDetails']}")
            shot = await call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        return PageResult(value["result"].get("value"), base64.b64decode(shot["data"]))

    def close(self) -> None:
        kill_tree(self.proc.pid)
        self.log.close()

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
