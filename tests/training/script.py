"""The documented training command, run as a user types it: ``bash scripts/train_cpu.sh OUT [OVERRIDES]`` with
the documented variables (``SCORER``, ``SCORER_URL``, ``STEPS``, ``FAILURE_POLICY``, ``LOOP_ARGS``,
``THINKER``, ``VENV``), and what the tests read back from a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from audio_reward.trainer_plugin.toy_task import supervise
from tests.testkit.server import REPO_ROOT

RUN_TIMEOUT_S = 1200.0
"""A run's bound in the tests (pytest's own per-test timeout, 600 s, is raised to match in each module)."""
CONSOLE = "console.log"
"""What the command printed (stdout and stderr), kept beside the run."""


def train_cpu(out: Path, *overrides: str, **variables: str) -> subprocess.Popen[bytes]:
    """Start ``bash scripts/train_cpu.sh OUT [OVERRIDES]`` with ``variables`` set (``VENV`` defaults to this
    interpreter's environment), in a session of its own so that :func:`ctrl_c` reaches it as a terminal would."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "VENV": str(Path(sys.executable).parents[1]), **variables}
    with (out / CONSOLE).open("wb") as console:
        return subprocess.Popen(["bash", str(REPO_ROOT / "scripts" / "train_cpu.sh"), str(out), *overrides],
                                env=env, stdout=console, stderr=subprocess.STDOUT, start_new_session=True)


def ctrl_c(proc: subprocess.Popen[bytes]) -> None:
    """What Ctrl-C in the terminal does: SIGINT to the command's whole foreground process group."""
    os.killpg(proc.pid, signal.SIGINT)


def stop_if_running(proc: subprocess.Popen[bytes], out: Path) -> None:
    """Stop a run the test no longer waits for (a failure, pytest's timeout) as Ctrl-C does, so that the
    trainer stops its own processes; if that takes over a minute, SIGKILL to the command's group and to every
    process carrying the run's marker (the trainer runs in a session of its own)."""
    if proc.poll() is not None:
        return
    ctrl_c(proc)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        run_id = out / "run_id"
        if run_id.is_file():
            supervise.sweep(run_id.read_text().strip())


def finished(proc: subprocess.Popen[bytes], out: Path, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Wait for the command; its ``train_summary.json`` (fails with the console and the log if there is none)."""
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run did not end within {timeout_s:.0f} s:\n{tail(out / CONSOLE)}\n{tail(out / 'train.log')}")
    finally:
        stop_if_running(proc, out)
    path = out / "train_summary.json"
    if not path.is_file():
        pytest.fail(f"no summary (exit {proc.returncode}):\n{tail(out / CONSOLE)}\n{tail(out / 'train.log')}")
    return json.loads(path.read_text())


def logged_steps(out: Path) -> int:
    """The training steps verl's file logger has written so far."""
    path = out / "metrics.jsonl"
    if not path.is_file():
        return 0
    steps = [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip().endswith("}")]
    return max(steps, default=0)


def wait_until(proc: subprocess.Popen[bytes], out: Path, done: Callable[[], bool], what: str,
               timeout_s: float = RUN_TIMEOUT_S) -> None:
    """Poll ``done`` until it holds; fail with the run's output if it ends or the time runs out first."""
    deadline = time.monotonic() + timeout_s
    try:
        while not done():
            if proc.poll() is not None:
                pytest.fail(f"the run ended ({proc.returncode}) before {what}:\n{tail(out / CONSOLE)}\n"
                            f"{tail(out / 'train.log')}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout_s:.0f} s:\n{tail(out / 'train.log')}")
            time.sleep(0.5)
    except BaseException:
        stop_if_running(proc, out)
        raise


def wait_for_step(proc: subprocess.Popen[bytes], out: Path, step: int) -> None:
    wait_until(proc, out, lambda: logged_steps(out) >= step, f"step {step}")


def wait_for_log(proc: subprocess.Popen[bytes], out: Path, text: str) -> None:
    log = out / "train.log"
    wait_until(proc, out, lambda: text in (log.read_text(errors="replace") if log.is_file() else ""), repr(text))


def tail(path: Path, limit: int = 6000) -> str:
    return path.read_text(errors="replace")[-limit:] if path.is_file() else f"(no {path})"


def console_steps(out: Path) -> list[str]:
    """The console's per-step lines (``step k/N  reward ...``)."""
    return [line for line in (out / CONSOLE).read_text(errors="replace").splitlines() if line.startswith("step ")]


def metrics(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def processes_with(text: str) -> list[str]:
    """Command lines of the processes (but this one) whose command line holds ``text``."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(entry.name) != os.getpid() and text.encode() in cmdline:
            found.append(cmdline.decode(errors="replace"))
    return found
