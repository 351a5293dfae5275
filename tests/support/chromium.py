"""Headless Chromium for tests, driven over the DevTools protocol with aiohttp's websocket client.

Why the protocol rather than ``--dump-dom``: one browser process gives the page's console errors and
uncaught exceptions (as events, not scraped log lines), runs the page's own script through user
actions (sort, search), reads the DOM after them, and takes the screenshot. aiohttp is already a
dependency, so this needs no new package. The browser is Debian's ``chromium``; tests skip with a
reason when it is absent (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
         "--remote-debugging-port=0", "--window-size=1400,1000"]


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, BINARIES) if path), None)


@dataclass
class PageProblems:
    """Everything the page reported as wrong while it was open."""

    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    log_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)

    def all(self) -> list[str]:
        return self.console_errors + self.exceptions + self.log_errors + self.failed_requests


class Browser:
    """One headless Chromium process with one page; use as a context manager (it ends the process)."""

    def __init__(self, workdir: Path):
        binary = find_chromium()
        if binary is None:
            raise RuntimeError("chromium not found")
        self.workdir = workdir
        profile = workdir / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        (profile / "DevToolsActivePort").unlink(missing_ok=True)  # a stale one names a dead browser's port
        self.log = (workdir / "chromium.log").open("wb")
        self.process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                        stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.port = self._wait_for_port(profile / "DevToolsActivePort")

    def _wait_for_port(self, marker: Path, timeout_s: float = 60.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}; see {self.log.name}")
            if marker.is_file():
                lines = marker.read_text().splitlines()
                if lines and lines[0].strip().isdigit():
                    return int(lines[0])
            time.sleep(0.1)
        raise RuntimeError(f"chromium did not open its DevTools port in {timeout_s:.0f}s; see {self.log.name}")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()

    def visit(self, url: str, script: list[str], screenshot: Path | None = None) -> tuple[list[Any], PageProblems]:
        """Load ``url``, evaluate each expression of ``script`` in order (their values come back), screenshot."""
        return asyncio.run(self._visit(url, script, screenshot))

    async def _visit(self, url: str, script: list[str], screenshot: Path | None) -> tuple[list[Any], PageProblems]:
        import aiohttp

        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{self.port}/json/list") as response:
                targets = await response.json()
            page = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                session = _Session(ws)
                reader = asyncio.create_task(session.read())
                try:
                    for method in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
                        await session.call(method)
                    loaded = session.wait_for("Page.loadEventFired")
                    await session.call("Page.navigate", url=url)
                    await asyncio.wait_for(loaded, 60)
                    values = [await session.evaluate(expression) for expression in script]
                    if screenshot is not None:
                        await session.screenshot(screenshot)
                    await asyncio.sleep(0.2)  # late console messages
                finally:
                    reader.cancel()
                return values, session.problems


class _Session:
    """Request/response matching and event collection over one DevTools websocket."""

    def __init__(self, ws: Any):
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.waiters: dict[str, asyncio.Future] = {}
        self.problems = PageProblems()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(future, 60)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_for(self, event: str) -> asyncio.Future:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.waiters[event] = future
        return future

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def screenshot(self, path: Path) -> None:
        """The page from its top (at most 7,000 px tall), 1,400 px wide."""
        await self.evaluate("window.scrollTo(0, 0)")
        await asyncio.sleep(0.1)
        metrics = await self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        clip = {"x": 0, "y": 0, "width": 1400, "height": min(float(size["height"]), 7000.0), "scale": 1}
        shot = await self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    async def read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self.pending.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
                continue
            self._event(data.get("method", ""), data.get("params", {}))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        waiter = self.waiters.pop(method, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(params)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            self.problems.console_errors.append(
                " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.exceptions.append(str(details.get("exception", {}).get("description") or details.get("text")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
            self.problems.log_errors.append(str(params["entry"].get("text")))
        elif method == "Network.loadingFailed":
            self.problems.failed_requests.append(str(params.get("errorText")))
        elif method == "Network.requestWillBeSent":
            url = params.get("request", {}).get("url", "")
            if not url.startswith(("file:", "data:", "about:")):
                self.problems.failed_requests.append(f"network request to {url}")
