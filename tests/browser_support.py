"""Debian's Chromium, headless, driven over the DevTools protocol (a WebSocket; no driver binary).

:class:`Browser` starts ``chromium`` with a fresh profile and no background networking, attaches to
its page, records every request the page makes (``Network.requestWillBeSent``) and offers the few
commands the tests need: navigate, evaluate JavaScript, wait for a condition, screenshot.
Screenshots go to ``$AGENTRAG_TEST_ARTIFACTS`` (default ``.artifacts/`` in the repository).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1366,900",
    "--remote-debugging-port=0",
]


def chromium() -> str:
    """The Chromium binary, or skip with the reason and the fix."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "Chromium is not installed (make setup installs Debian's chromium when run as root on Debian)"
    )


def artifacts_dir() -> Path:
    path = Path(os.environ.get("AGENTRAG_TEST_ARTIFACTS") or REPO / ".artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Browser:
    def __init__(self, profile: Path) -> None:
        from websockets.sync.client import connect

        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a reused profile's file names a port long gone
        self.process = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.requests: list[str] = []
        try:
            deadline = time.monotonic() + 120  # a bound for a failure only
            while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Chromium did not start its DevTools endpoint")
                time.sleep(0.05)
            port = int(port_file.read_text().splitlines()[0])
            page = self._page_socket(port, deadline)
            self._connection = connect(page, max_size=None, open_timeout=30)
            self.socket = self._connection.__enter__()
            self.send("Page.enable")
            self.send("Network.enable")
            self.send("Runtime.enable")
            self.send("Emulation.setFocusEmulationEnabled", {"enabled": True})  # focus events while headless
        except BaseException:
            self.close()  # never leave a browser behind
            raise

    @staticmethod
    def _page_socket(port: int, deadline: float) -> str:
        import httpx

        while True:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=5).json()
            pages = [t for t in targets if t.get("type") == "page"]
            if pages:
                return str(pages[0]["webSocketDebuggerUrl"])
            if time.monotonic() > deadline:
                raise RuntimeError("Chromium has no page")
            time.sleep(0.05)

    def _record(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        if message.get("method") == "Network.requestWillBeSent":
            self.requests.append(message["params"]["request"]["url"])

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        ident = next(self.ids)
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self._record(message)

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for: {expression}")
            time.sleep(0.05)

    def screenshot(self, name: str) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path = artifacts_dir() / name
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        connection = getattr(self, "_connection", None)
        if connection is not None:
            connection.__exit__(None, None, None)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
