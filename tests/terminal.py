"""A real pseudo-terminal for tests of what `ops` draws on a TTY: a tmux server on a private socket.

    term = Terminal(); term.run("ops eval …"); screen = term.wait_for("EXIT="); term.close()

`run` appends `echo EXIT=$?` and keeps the pane open, so the last screen can be read after the
command ended; `close` kills that tmux server (our own socket only) and removes its socket file.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path


class Terminal:
    """A tmux server on a private socket with one 160x50 window: a real pseudo-terminal."""

    def __init__(self) -> None:
        self.socket = f"ops-term-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.session = "t"

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30,
                              check=False)

    def run(self, command: str) -> None:
        # COLUMNS/LINES from the test's environment would override the pane's real size
        started = self.tmux("new-session", "-d", "-s", self.session, "-x", "160", "-y", "50",
                            f"unset COLUMNS LINES; {command}; echo EXIT=$?; sleep 600")
        assert started.returncode == 0, started.stderr

    def keys(self, *keys: str) -> None:
        """Type into the pane (tmux key names: `C-c` is Ctrl-C)."""
        sent = self.tmux("send-keys", "-t", self.session, *keys)
        assert sent.returncode == 0, sent.stderr

    def screen(self) -> str:
        """The whole pane, scrollback included, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-E", "-").stdout

    def wait_for(self, text: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the pane shows:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server")
        tmux_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        (tmux_dir / self.socket).unlink(missing_ok=True)
