"""Real scorer servers for tests, on loopback.

``running_server(**settings)`` starts ``python -m audio_reward.cli serve`` in a
subprocess on a free port, waits for ``/readyz`` and yields a :class:`ServerHandle`
(URL, process, log); on exit it sends SIGTERM, then SIGKILL if the server has
not stopped.  Settings are given as keyword arguments named like
:class:`ServerSettings` fields and become CLI flags (``max_queue=2`` →
``--max-queue 2``); ``env`` adds environment variables; ``instant=True`` serves
the instant engine (:mod:`tests.testkit.instant_engine`) instead of a model;
``python`` names the interpreter (default :func:`server_python`).
This is the one launcher: tests, fixtures and benchmarks all start servers here.

``inprocess_server(engine, **settings)`` runs the same app under a
``uvicorn.Server`` in a thread with an injected engine object, for fault
tests that need a deliberately slow or failing engine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from audio_reward.scorer_server.settings import ServerSettings

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
        elif isinstance(value, (list, tuple)):  # a flag taking several values (--served-model-name a b)
            flags += [flag, *map(str, value)]
        elif value is not None:
            flags += [flag, str(value)]
    return flags


def wait_ready(base_url: str, timeout_s: float, *, proc: subprocess.Popen[bytes] | None = None,
               log_path: Path | None = None, path: str = "/readyz") -> None:
    """Poll ``path`` (``/readyz``; ``/health`` for ``vllm serve``) until it answers 200.

    Raises with the server's output if it dies or times out.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServerStartError(f"server exited with {proc.returncode}:\n{_tail(log_path)}")
            try:
                r = client.get(f"{base_url}{path}")
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


def server_python() -> str:
    """The interpreter that runs scorer servers: ``AUDIO_REWARD_TEST_SERVER_PYTHON``, else this one.

    The trainer's environments (verl, the TTS model) cannot hold the server's
    dependencies, so their tests start the server from the main environment.
    """
    return os.environ.get("AUDIO_REWARD_TEST_SERVER_PYTHON") or sys.executable


@dataclass
class ServerHandle:
    """A scorer server process on loopback: its URL, process, log file and the settings it got."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    settings: dict[str, Any]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, limit: int = 4000) -> str:
        return _tail(self.log_path, limit)


def serve_command(settings: dict[str, Any], *, instant: bool = False, delay_ms: float = 0.0,
                  python: str | None = None, root: Path = REPO_ROOT) -> list[str]:
    """The command line of a scorer server: ``audio-reward serve``, or the same with the instant engine."""
    interpreter = python or server_python()
    if not instant:
        return [interpreter, "-m", "audio_reward.cli", "serve", *settings_to_flags(settings)]
    if (root / "tests" / "testkit" / "instant_engine.py").exists():
        entry = ["-m", "tests.testkit.instant_engine"]
    else:  # an older checkout given to ``bench/load.py --baseline`` keeps the engine in bench/load.py
        entry = [str(root / "bench" / "load.py"), "serve"]
    return [interpreter, *entry, "--engine-delay-ms", str(delay_ms), *settings_to_flags(settings)]


def launch(
    settings: dict[str, Any], log_path: Path, *, instant: bool = False, delay_ms: float = 0.0,
    env: dict[str, str] | None = None, python: str | None = None, root: Path = REPO_ROOT,
) -> subprocess.Popen[bytes]:
    """Start a server process without waiting for it; its output is appended to ``log_path``.

    The server runs the code of the checkout at ``root`` (this one unless told), whatever is installed.
    """
    cmd = serve_command(settings, instant=instant, delay_ms=delay_ms, python=python, root=root)
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    with open(log_path, "ab") as log:
        return subprocess.Popen(cmd, cwd=root, env=full_env, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def server_process(
    *,
    instant: bool = False,
    delay_ms: float = 0.0,
    env: dict[str, str] | None = None,
    python: str | None = None,
    root: Path = REPO_ROOT,
    **settings: Any,
) -> Iterator[ServerHandle]:
    """Start a scorer server on a free loopback port without waiting; stopped (SIGTERM, then SIGKILL) on exit.

    ``settings`` are named like :class:`ServerSettings` fields and become flags
    (``max_queue=2`` → ``--max-queue 2``); ``env`` adds environment variables;
    ``instant`` serves the instant engine of :mod:`tests.testkit.instant_engine`.
    """
    settings.setdefault("host", "127.0.0.1")
    settings.setdefault("port", free_port())
    url = f"http://{settings['host']}:{settings['port']}"
    with tempfile.TemporaryDirectory(prefix="audio-reward-server-") as tmp:
        log_path = Path(tmp) / "server.log"
        proc = launch(settings, log_path, instant=instant, delay_ms=delay_ms, env=env, python=python, root=root)
        try:
            yield ServerHandle(url, proc, log_path, settings)
        finally:
            stop_process(proc)


@contextlib.contextmanager
def running_server(*, ready_timeout_s: float = 180.0, **options: Any) -> Iterator[ServerHandle]:
    """:func:`server_process`, yielded once ``/readyz`` answers 200."""
    with server_process(**options) as handle:
        wait_ready(handle.url, ready_timeout_s, proc=handle.proc, log_path=handle.log_path)
        yield handle


@contextlib.contextmanager
def inprocess_server(
    engine: Any = None, *, ready: bool = True, ready_timeout_s: float = 120.0, **settings: Any
) -> Iterator[tuple[str, Any]]:
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


def parse_serve_args(argv: list[str]) -> ServerSettings:
    """The settings ``audio-reward serve ARGV`` would run with (flags over the environment over ``--config``),
    without serving."""
    from audio_reward.scorer_server import cli
    from audio_reward.scorer_server.flags import server_overrides
    from audio_reward.scorer_server.settings import ServerSettings

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["serve", *argv])
    return ServerSettings.load(server_overrides(args), args.config)
