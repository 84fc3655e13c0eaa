"""Run ``ragspine serve`` as a real process on 127.0.0.1 for tests; stopped by the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragspine.cli", *args], capture_output=True, text=True, check=False
    )


def create_key(root: Path, *options: str) -> str:
    """A new key's secret: the last line ``ragspine keys create`` prints."""
    proc = run_cli("keys", "create", "--kb-root", str(root), *options)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@contextmanager
def served(
    root: Path, *extra: str, timeout: float = 30.0, stderr: list[str] | None = None
) -> Iterator[str]:
    """The base URL of a ``ragspine serve`` process over ``root``; what it printed on stderr is
    appended to ``stderr`` when it has stopped."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragspine.cli", "serve", "--kb-root", str(root),
         "--host", "127.0.0.1", "--port", str(port), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                output = proc.stderr.read() if proc.stderr else ""
                raise RuntimeError(f"ragspine serve exited: {output}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("ragspine serve did not come up")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            _, errors = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, errors = proc.communicate()
        if stderr is not None:
            stderr.append(errors)
