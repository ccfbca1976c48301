"""The toy GRPO loop on the CPU, measured on both of its scorers: the reward of the first and last steps, the
held-out prompts' reward before and after, seconds per step by phase, and the peak resident memory of the whole
run (trainer, Ray workers, the vLLM rollout and the scorer).

Runs ``python -m audio_reward.trainer_plugin.toy_task.train`` (what ``scripts/train_cpu.sh`` runs) against a
scorer on loopback, once per engine: ``instant`` (the instant engine) and ``tiny.en`` (Whisper tiny.en on
espeak-ng speech), in the trainer environment (``scripts/envs/verl.sh``)::

    .venv-verl/bin/python -m bench.grpo_cpu [--steps 8] [--engines instant tiny.en] [--out DIR] [-- OVERRIDES...]

Phases are verl's own timers (``timing_s/gen``: rollout and reward, ``old_log_prob``, ``update_actor``,
``update_weights``: the weight sync to the rollout), medians over the steps after the first; the memory is
the largest sum of RSS over the process tree, sampled every half second.  Prints one JSON object, keyed by
engine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from tests.testkit.server import running_server

PHASES = ("gen", "old_log_prob", "adv", "update_actor", "update_weights", "step")


def run_rss(roots: list[psutil.Process]) -> int:
    """Summed RSS of the roots' process trees and of every Ray or vLLM process (Ray may re-parent its
    workers), each process counted once."""
    procs = {p.pid: p for root in roots for p in [root, *root.children(recursive=True)]}
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info.get("cmdline") or [])
        if line.startswith("ray::") or "raylet" in line or "gcs_server" in line or "EngineCore" in line:
            procs.setdefault(proc.pid, proc)
    total = 0
    for proc in procs.values():
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue  # ended between the listing and the reading
    return total


SCORERS = {"instant": ({"instant": True}, "instant"), "tiny.en": ({"model": "tiny.en"}, "espeak")}
"""Each engine's server options and the speech the policy's words become for it."""


def measure(out: Path, steps: int, overrides: list[str], engine: str) -> dict[str, Any]:
    peak = 0
    options, speech = SCORERS[engine]
    with running_server(**options) as scorer:
        command = [sys.executable, "-m", "audio_reward.trainer_plugin.toy_task.train", str(out), "--scorer-url",
                   scorer.url, "--speech", speech, "--steps", str(steps), "--", *overrides]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        roots = [psutil.Process(proc.pid), psutil.Process(scorer.pid)]
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                with contextlib.suppress(psutil.Error):
                    peak = max(peak, run_rss(roots))
                time.sleep(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        proc.wait()
        done.set()
        sampler.join()
    summary = json.loads((out / "train_summary.json").read_text())
    timings = [json.loads(line)["data"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    timings = [t for t in timings if "timing_s/step" in t][1:]  # the first step warms the rollout up
    rewards = summary["reward_mean"]
    return {
        "steps": summary["steps"],
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
        "val_reward_before_after": summary["val_reward_mean"],
        "heldout": summary.get("heldout"),
        "seconds_per_step_median": {p: round(statistics.median(t[f"timing_s/{p}"] for t in timings), 3)
                                    for p in PHASES if timings and all(f"timing_s/{p}" in t for t in timings)},
        "rollout_probs_diff_max": max(summary["rollout_probs_diff_max"], default=None),
        "peak_rss_gib": round(peak / 2**30, 2),
        "wall_s": round(time.monotonic() - started, 1),
        "out": str(out),
    }


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m bench.grpo_cpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--engines", nargs="+", choices=tuple(SCORERS), default=list(SCORERS))
    parser.add_argument("--out", type=Path, default=None, help="the runs' folder (default: a temporary one)")
    args = parser.parse_args(argv[:split])
    out = args.out or Path(tempfile.mkdtemp(prefix="grpo_cpu_"))
    results = {engine: measure(out / engine, args.steps, argv[split + 1:], engine) for engine in args.engines}
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
