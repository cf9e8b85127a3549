# Headless Chromium for the inspector's browser test (tests/inspect/).
#
# Why chromedriver over plain HTTP rather than selenium or a CDP client: chromedriver speaks
# the W3C WebDriver protocol, which is JSON over HTTP, and the handful of commands a test needs
# (open a session, navigate, run a script, take a screenshot) are one request each. urllib
# does that; selenium would add a package (with its own pinned trio and urllib3) for the same
# five calls, and raw CDP needs a websocket client besides. Debian's `chromium-driver` package
# matches `chromium` exactly, so the pair is installed together (.ci/run).
#
# The calls block: a trio test runs them with trio.to_thread.run_sync, so the server under
# test, in the same process, goes on serving the page meanwhile.
from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

from support.system import CHROMIUM_NAMES

__all__ = ["Browser", "find_chromium", "open_browser"]

INSTALL_HINT = (
    "the browser test needs headless Chromium and its driver: "
    "apt-get install -y chromium chromium-driver (the test run installs them where it may: "
    "tests/support/system.py)"
)


def find_chromium() -> tuple[str, str]:
    """The paths of chromium and chromedriver; RuntimeError naming the install when either
    is missing."""
    browser = next((p for n in CHROMIUM_NAMES if (p := shutil.which(n))), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise RuntimeError(INSTALL_HINT)
    return browser, driver


class Browser:
    """One WebDriver session of a headless Chromium."""

    def __init__(self, base: str, session_id: str) -> None:
        self._base = base
        self._session = f"{base}/session/{session_id}"

    def _call(self, method: str, url: str, payload: Any = None, timeout: float = 60.0) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            url, data=data, method=method, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"webdriver {method} {url}: {exc.read()[:500]!r}") from None

    def get(self, url: str) -> None:
        self._call("POST", f"{self._session}/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body; ``arguments`` are ``args``) and return its value."""
        payload = {"script": script, "args": list(args)}
        return self._call("POST", f"{self._session}/execute/sync", payload)

    def frame(self, element: Any) -> None:
        """Run the next commands inside the iframe ``element`` (a reference a script returned:
        ``return document.querySelector("iframe")``), whatever its origin."""
        self._call("POST", f"{self._session}/frame", {"id": element})

    def parent_frame(self) -> None:
        """Run the next commands in the frame that holds the current one."""
        self._call("POST", f"{self._session}/frame/parent", {})

    def screenshot(self) -> bytes:
        return base64.b64decode(self._call("GET", f"{self._session}/screenshot"))

    def set_window(self, width: int, height: int) -> None:
        self._call("POST", f"{self._session}/window/rect", {"width": width, "height": height})

    def quit(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            self._call("DELETE", self._session, timeout=10.0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextlib.contextmanager
def open_browser(*, width: int = 1400, height: int = 900) -> Iterator[Browser]:
    """Start chromedriver on a free loopback port and a headless Chromium through it."""
    browser_path, driver_path = find_chromium()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    profile = tempfile.mkdtemp(prefix="trio-mcp-chromium-")
    driver = subprocess.Popen(
        [driver_path, f"--port={port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    browser: Browser | None = None
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/status", timeout=2) as resp:
                    if json.loads(resp.read())["value"].get("ready"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or driver.poll() is not None:
                raise RuntimeError(f"chromedriver did not start on port {port}")
            time.sleep(0.1)
        args = [
            "--headless=new", "--disable-gpu", "--disable-dev-shm-usage",
            f"--window-size={width},{height}", f"--user-data-dir={profile}",
            "--no-first-run", "--disable-extensions",
        ]
        if os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": browser_path, "args": args},
        }}}
        req = urllib.request.Request(
            f"{base}/session", data=json.dumps(caps).encode(), method="POST",
            headers={"content-type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                session_id = json.loads(resp.read())["value"]["sessionId"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"chromium did not start: {exc.read()[:800]!r}") from None
        browser = Browser(base, session_id)
        yield browser
    finally:
        if browser is not None:
            browser.quit()
        driver.terminate()
        try:
            driver.wait(10)
        except subprocess.TimeoutExpired:
            driver.kill()
        shutil.rmtree(profile, ignore_errors=True)
