"""The trainer as a process tree that a person can follow and stop.

``main_ppo`` starts Ray, and Ray starts a dozen processes of its own; two of
them (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) ignore SIGTERM and
outlive a trainer stopped by Ctrl-C.  So the trainer runs in a session of its
own, every process of the run carries a marker in its environment (Ray's
processes inherit the driver's environment), and :func:`stop` ends the
trainer in the order a person would (SIGINT, so verl and Ray shut down, then
SIGTERM, then SIGKILL) and then kills whatever still carries the marker.

While it runs, :func:`follow` writes one console line per logged step (step,
reward, validation reward where there is one, seconds) from verl's file
logger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..reward_curve import read_curve

logger = logging.getLogger(__name__)

MARKER = "AUDIO_REWARD_TOY_RUN"
"""Environment variable every process of one run carries, with the run's id as its value."""
STOP_GRACE_S = (15.0, 5.0)
"""How long the trainer is given after SIGINT, then after SIGTERM, before SIGKILL."""
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::\s.*)?$")
_REWARD_FAILURE = "RewardFailureError: "
_HYDRA_LINES = ("Could not override", "Error merging override", "Could not append to config",
                "Could not delete from config", "mismatched input", "Key '")


def start(command: Sequence[str], env: Mapping[str, str], log: Path, run_id: str) -> subprocess.Popen[bytes]:
    """Start ``command`` in a session of its own with the run's marker, its output into ``log``."""
    with log.open("wb") as sink:
        return subprocess.Popen(list(command), env={**env, MARKER: run_id}, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)


def follow(proc: subprocess.Popen[bytes], metrics: Path, steps: int, poll_s: float = 1.0) -> int:
    """Wait for ``proc``, logging each step verl's file logger writes to ``metrics``; its exit status."""
    shown = -1  # step 0 is the validation before training
    while True:
        returncode = proc.poll()
        if metrics.is_file():
            for record in read_curve(metrics):
                if record["step"] > shown and (record["step_s"] is not None or record["step"] == 0):
                    logger.info("%s", step_line(record, steps))
                    shown = record["step"]
        if returncode is not None:
            return returncode
        time.sleep(poll_s)


def step_line(record: Mapping[str, object], steps: int) -> str:
    """``step 3/12  reward 0.512  val 0.400  14.2 s``; step 0 is the validation before training."""
    def number(key: str) -> str:
        value = record.get(key)
        return "masked" if value is None else f"{value:.3f}"

    if record["step"] == 0:
        return f"before training: val {number('val_reward_mean')}"
    val = [f"val {number('val_reward_mean')}"] if record.get("val_reward_mean") is not None else []
    return "  ".join([f"step {record['step']}/{steps}", f"reward {number('reward_mean')}", *val,
                      f"{record['step_s']:.1f} s"])


def marked(run_id: str) -> list[int]:
    """Processes whose environment carries the run's marker (Linux ``/proc``; none found elsewhere)."""
    needle = f"{MARKER}={run_id}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # gone, or another user's
            if int(entry.name) != os.getpid() and needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def stop(proc: subprocess.Popen[bytes], run_id: str) -> None:
    """End the trainer (SIGINT, SIGTERM, SIGKILL to its session, each after a grace) and every marked process.

    A second Ctrl-C while it waits is ignored: it would leave the processes it is stopping behind.
    """
    with interrupts_ignored():
        for sig, grace in zip((signal.SIGINT, signal.SIGTERM), STOP_GRACE_S, strict=True):
            _signal_group(proc, sig)
            try:
                proc.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        _signal_group(proc, signal.SIGKILL)
        proc.wait()
        sweep(run_id)


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ctrl-C does nothing inside: for the steps that clean up after one."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def sweep(run_id: str) -> None:
    """SIGKILL what is left of the run (Ray's agents outlive their driver)."""
    for pid in marked(run_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def failure_line(log: Path) -> str | None:
    """What in the trainer's log says why it failed: the fail-closed sampler's message (with the failed groups
    it lists), Hydra's override error, or the last exception."""
    if not log.is_file():
        return None
    text = log.read_text(encoding="utf-8", errors="replace")
    at = text.rfind(_REWARD_FAILURE)
    if at >= 0:
        rest = text[at + len(_REWARD_FAILURE):].splitlines()
        return "\n".join([rest[0], *[line for line in rest[1:5] if line.lstrip().startswith("[")]])
    lines = [line.strip() for line in text.splitlines()]
    if hydra := [line for line in lines if line.startswith(_HYDRA_LINES)]:
        return " ".join(hydra[:2])
    return next((line for line in reversed(lines) if _EXCEPTION_LINE.match(line)), None)
