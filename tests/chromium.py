"""A small client of Chromium's DevTools protocol over --remote-debugging-pipe, for the
browser tests: headless Chromium, no websocket library, no network.

Chromium reads NUL-terminated JSON commands on its fd 3 and writes responses and events on
its fd 4. One page target is attached in flattened mode; console errors, uncaught
exceptions and the browser's own error log entries (a script that failed to load, a
Content-Security-Policy violation) are collected as they arrive.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# Launch flags from the machine notes: without the background-networking ones Chromium
# keeps trying to reach Google's hosts, which a closed network refuses.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--allow-file-access-from-files")


def find() -> str | None:
    """The Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        self.profile = tempfile.mkdtemp(prefix="cortex-chromium-")
        to_child_r, self._out = os.pipe()
        self._in, from_child_w = os.pipe()

        def wire() -> None:  # in the child, before exec: the pipes on fds 3 and 4
            # (through high numbers first: a pipe already on fd 3 or 4 would keep its
            # close-on-exec flag through dup2 onto itself)
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 100)
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 100)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={width},{height}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4))
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=height, deviceScaleFactor=1, mobile=False)

    # --- the protocol -------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._out, data):]

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium exited")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        if "method" in message:
            self._event(message)
        return message

    def _event(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        method, params = message["method"], message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())

    def call(self, method: str, session: bool = False, timeout: float = 20,
             **params: Any) -> dict[str, Any]:
        """Send a command and wait for its answer (collecting events meanwhile)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result

    def wait_event(self, method: str, timeout: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(deadline)
            if message.get("method") == method:
                return message

    # --- what the tests use --------------------------------------------------------------

    def open(self, url: str, timeout: float = 20) -> None:
        """Load `url` and wait for its load event."""
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired", timeout)

    def eval(self, expression: str, timeout: float = 20) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", session=True, timeout=timeout,
                           expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15) -> Any:
        """Poll `expression` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._in, self._out):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)
