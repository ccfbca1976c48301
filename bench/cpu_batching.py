"""Batched against one-at-a-time decoding in the faster-whisper engine on the CPU, in-process.

The same engine class twice, on the same weights and threads: ``--engine-option batched=false`` (one encoder
pass and one decode per utterance) and ``batched=true`` (the server's default: one encoder pass over the stacked
windows and one batched decode per call).  For each batch size N, N distinct hibari-tts
utterances are transcribed as N calls of one and as one call of N, in interleaved rounds; the bench prints
audio seconds per wall second, CPU seconds per audio second, the ratio batched / one-at-a-time (the median
of the rounds), and whether the two give the same transcripts.  A batch of N is what the server's scheduler
hands the engine when N requests wait, so N = 8 stands for concurrency 8.

With ``--server`` it measures the same two settings through two ``audio-reward serve`` processes instead, at
concurrency 1, 8 and 32 (``/score``, verl-omni's requests; interleaved rounds): audio seconds per second, p50
latency, and the server process's CPU seconds per audio second.

    python -m bench.cpu_batching [--model tiny.en] [--threads 2] [--batch-sizes 1 4 8 16] [--rounds 3]
    python -m bench.cpu_batching --server [--concurrency 1 8 32] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np

from audio_reward.scorer_server.engines import EngineConfig, TranscriptionInput
from audio_reward.scorer_server.engines.faster_whisper_engine import FasterWhisperEngine
from bench.server_throughput import SENTENCES, Run, drive, make_speech, median_run, request_body, start
from tests.testkit.server import free_port, stop_process, wait_ready
from tests.testkit.speech import speech_16k


def engine(model: str, threads: int, batched: bool) -> FasterWhisperEngine:
    """A loaded, warmed faster-whisper engine with batched decoding forced on or off."""
    loaded = FasterWhisperEngine(EngineConfig(model=model, cpu_threads=threads, options={"batched": batched}))
    loaded.load()
    loaded.warmup()
    return loaded


def run(eng: FasterWhisperEngine, items: Sequence[TranscriptionInput],
        batch_size: int) -> tuple[float, float, list[str]]:
    """Wall and CPU seconds to transcribe ``items`` in calls of ``batch_size``, and the transcripts."""
    wall, cpu = time.perf_counter(), time.process_time()
    texts: list[str] = []
    for k in range(0, len(items), batch_size):
        texts += [t.text for t in eng.transcribe_batch_sync(items[k:k + batch_size])]
    return time.perf_counter() - wall, time.process_time() - cpu, texts


def servers(args: argparse.Namespace) -> int:
    """Both settings through real servers, side by side."""
    import psutil

    speech = make_speech()
    bodies = [(request_body(t, a, r), len(a) / r) for t, a, r in speech]
    base = [sys.executable, "-m", "audio_reward.cli", "serve", "--model", args.model, "--cpu-threads",
            str(args.threads), "--max-batch-size", "16", "--language", "en"]
    urls, procs = {}, {}
    try:
        for name in ("one", "batched"):
            port = free_port()
            procs[name] = start([*base, "--port", str(port), "--engine-option",
                                 f"batched={'true' if name == 'batched' else 'false'}"])
            urls[name] = f"http://127.0.0.1:{port}"
        for name, proc in procs.items():
            wait_ready(urls[name], 180, proc=proc)
            asyncio.run(drive(urls[name], bodies, 1, 2, name))  # warm the connection and the model
        print(f"model {args.model}, {args.threads} threads, through the server; median of {args.rounds} rounds")
        print("| concurrency | one at a time (audio s/s, p50) | batched (audio s/s, p50) | batched / one "
              "| server CPU s per audio s, one / batched | errors |")
        print("|---|---|---|---|---|---|")
        for c in args.concurrency:
            total = max(32, c)
            runs: dict[str, list[Run]] = {"one": [], "batched": []}
            cpu: dict[str, list[float]] = {"one": [], "batched": []}
            for r in range(args.rounds):
                for name in ("one", "batched") if r % 2 == 0 else ("batched", "one"):
                    process = psutil.Process(procs[name].pid)
                    before = sum(process.cpu_times()[:2])
                    run = asyncio.run(drive(urls[name], bodies, c, total, name))
                    cpu[name].append((sum(process.cpu_times()[:2]) - before) / max(run.audio_s, 1e-9))
                    runs[name].append(run)
            one, batched = median_run(runs["one"]), median_run(runs["batched"])
            errors = sum(r.errors for rs in runs.values() for r in rs)
            print(f"| {c} | {one.throughput:.2f}, {one.pct(0.5):.2f} s | {batched.throughput:.2f}, "
                  f"{batched.pct(0.5):.2f} s | {batched.throughput / one.throughput:.2f}x "
                  f"| {statistics.median(cpu['one']):.3f} / {statistics.median(cpu['batched']):.3f} | {errors} |",
                  flush=True)
    finally:
        for proc in procs.values():
            stop_process(proc, grace_s=30)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--server", action="store_true", help="through two servers instead of in-process")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    if args.server:
        return servers(args)

    clips = [speech_16k(text) for text in SENTENCES]
    engines = {"one": engine(args.model, args.threads, False), "batched": engine(args.model, args.threads, True)}
    print(f"model {args.model}, {args.threads} threads, {len(clips)} distinct utterances "
          f"({sum(len(c) for c in clips) / 16000:.1f} s), median of {args.rounds} interleaved rounds "
          "(alternating which goes first)")
    print("| batch | one at a time (audio s/s) | batched (audio s/s) | batched / one "
          "| CPU s per audio s, one / batched | same transcripts |")
    print("|---|---|---|---|---|---|")
    for size in args.batch_sizes:
        items = [TranscriptionInput(clips[i % len(clips)]) for i in range(max(size, len(clips)))]
        audio_s = sum(item.duration_s for item in items)
        walls: dict[str, list[float]] = {"one": [], "batched": []}
        cpus: dict[str, list[float]] = {"one": [], "batched": []}
        texts: dict[str, list[str]] = {}
        for r in range(args.rounds):
            # Interleaved, and each goes first in every other round, so load on the machine and whatever the
            # first run of a round pays hit both alike.
            for name in ("one", "batched") if r % 2 == 0 else ("batched", "one"):
                wall, cpu, out = run(engines[name], items, 1 if name == "one" else size)
                walls[name].append(wall)
                cpus[name].append(cpu)
                texts[name] = out
        one, batched = (audio_s / statistics.median(walls[k]) for k in ("one", "batched"))
        cpu_one, cpu_batched = (statistics.median(cpus[k]) / audio_s for k in ("one", "batched"))
        same = sum(a == b for a, b in zip(texts["one"], texts["batched"], strict=True))
        print(f"| {size} | {one:.2f} | {batched:.2f} | {batched / one:.2f}x | {cpu_one:.3f} / {cpu_batched:.3f} "
              f"| {same} of {len(items)} |")
    for eng in engines.values():
        eng.close()
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    raise SystemExit(main())
