"""Real scorer servers for tests, on loopback.

``running_server(**settings)`` starts ``python -m audio_reward.cli serve`` in a
subprocess on a free port, waits for ``/readyz`` and yields the base URL; on
exit it sends SIGTERM, then SIGKILL if the server has not stopped.  Settings
are given as keyword arguments named like :class:`ServerSettings` fields and
become CLI flags (``max_queue=2`` → ``--max-queue 2``); ``env`` adds
environment variables (``AUDIO_REWARD_API_KEY``...).

``inprocess_server(engine, **settings)`` runs the same app under a
``uvicorn.Server`` in a thread with an injected engine object, for fault
tests that need a deliberately slow or failing engine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


class ServerStartError(RuntimeError):
    """The server exited or never became ready; the message holds its output."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_to_flags(settings: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            flags += [flag, str(value)]
    return flags


def wait_ready(base_url: str, timeout_s: float, *, proc: subprocess.Popen[bytes] | None = None,
               log_path: Path | None = None) -> None:
    """Poll ``/readyz`` until it answers 200; raise with the server's output if it dies or times out."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServerStartError(f"server exited with {proc.returncode}:\n{_tail(log_path)}")
            try:
                r = client.get(f"{base_url}/readyz")
                if r.status_code == 200:
                    return
                last = f"{r.status_code} {r.text}"
            except httpx.TransportError as exc:
                last = repr(exc)
            time.sleep(0.1)
    raise ServerStartError(f"server at {base_url} not ready after {timeout_s:g} s ({last}):\n{_tail(log_path)}")


def _tail(path: Path | None, limit: int = 4000) -> str:
    if path is None or not path.exists():
        return ""
    return path.read_text(errors="replace")[-limit:]


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> int:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return int(proc.returncode)


@contextlib.contextmanager
def server_process(*, env: dict[str, str] | None = None, **settings: Any) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """Start ``audio-reward serve`` without waiting; yields (base URL, process, log file path)."""
    settings.setdefault("host", "127.0.0.1")
    settings.setdefault("port", free_port())
    base_url = f"http://{settings['host']}:{settings['port']}"
    cmd = [sys.executable, "-m", "audio_reward.cli", "serve", *settings_to_flags(settings)]
    full_env = {**os.environ, **(env or {})}
    with tempfile.TemporaryDirectory(prefix="audio-reward-server-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=full_env, stdout=log_file, stderr=subprocess.STDOUT)
            try:
                yield base_url, proc, log_path
            finally:
                stop_process(proc)


@contextlib.contextmanager
def running_server(*, env: dict[str, str] | None = None, ready_timeout_s: float = 120.0, **settings: Any) -> Iterator[str]:
    """A real ``audio-reward serve`` subprocess, ready to score; yields its base URL."""
    with server_process(env=env, **settings) as (base_url, proc, log_path):
        wait_ready(base_url, ready_timeout_s, proc=proc, log_path=log_path)
        yield base_url


@contextlib.contextmanager
def inprocess_server(engine: Any = None, *, ready: bool = True, ready_timeout_s: float = 120.0,
                     **settings: Any) -> Iterator[tuple[str, Any]]:
    """The scorer app under ``uvicorn.Server`` in a thread; yields (base URL, FastAPI app).

    ``engine`` is an unloaded :class:`ASREngine` used instead of the one the
    settings name.  With ``ready=False`` the URL is yielded as soon as the
    server listens, before the engine is loaded.
    """
    import uvicorn

    from audio_reward.scorer_server.app import build_app
    from audio_reward.scorer_server.http.server import uvicorn_config
    from audio_reward.scorer_server.settings import ServerSettings

    settings.setdefault("host", "127.0.0.1")
    settings.setdefault("port", free_port())
    server_settings = ServerSettings(**settings)
    app = build_app(server_settings, engine=engine)
    config = uvicorn_config(app, server_settings, access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    # uvicorn installs signal handlers only in the main thread; here it must not.
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    base_url = f"http://{settings['host']}:{settings['port']}"
    try:
        deadline = time.monotonic() + ready_timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ServerStartError(f"in-process server at {base_url} did not start")
            time.sleep(0.02)
        if ready:
            wait_ready(base_url, max(1.0, deadline - time.monotonic()))
        yield base_url, app
    finally:
        server.should_exit = True
        thread.join(30)
