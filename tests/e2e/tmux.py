"""A private tmux server for the interactive tests: Claude Code's real terminal UI, read
from the screen and driven with keys."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

WAIT_S = 30.0


@dataclass
class Tmux:
    """A private tmux server with one session; ``screen()`` is the visible pane text."""

    socket: str
    session: str = "claude"

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout

    def start(self, command: str, cwd: str) -> None:
        self.tmux("new-session", "-d", "-s", self.session, "-x", "160", "-y", "50", "-c", cwd)
        self.tmux("send-keys", "-t", self.session, command, "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def wait_for(self, what: Callable[[str], bool], label: str, timeout: float = WAIT_S) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if what(screen):
                return screen
            time.sleep(0.25)
        msg = f"timed out after {timeout:g} s waiting for {label}; screen:\n{screen}"
        raise AssertionError(msg)

    def kill(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10, check=False
        )
