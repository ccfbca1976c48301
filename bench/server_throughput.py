"""Scoring throughput of the server, against the engine's limit and a lock-per-request server.

Three things are measured in one run on the same utterances (hibari-tts speech,
24 kHz, sent as verl-omni's float32 base64 requests) and the same model:

- ``engine``: the faster-whisper engine called in-process on the 16 kHz audio at
  batch sizes 1, 4, 8 and 16; the best is the ceiling a server can approach.
- ``ours``: ``audio-reward serve`` (micro-batching) in its own process.
- ``locked``: verl-omni's reference design, built here as a minimal FastAPI app:
  each request decodes, resamples and calls ``WhisperModel.transcribe`` under a
  ``threading.Lock`` (one utterance at a time), then scores.

For each server and concurrency (1, 8, 32 in flight) it prints audio seconds
scored per wall second, p50/p99 latency and the ratios ours/locked and
ours/engine-best.

    python -m bench.server_throughput [--model tiny.en] [--device cpu] [--threads 2] [--concurrency 1 8 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx
import numpy as np

from tests.testkit.server import free_port, stop_process, wait_ready

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "She sells sea shells by the sea shore every summer morning.",
    "Reinforcement learning needs a reward that is fast and honest.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "A rainbow is a division of white light into many beautiful colors.",
    "The museum opens at nine and closes early on public holidays.",
    "Seven purple elephants were painting the kitchen on a rainy Tuesday.",
    "Our train was delayed by twenty minutes because of the snow.",
]


@dataclass
class Run:
    name: str
    concurrency: int
    audio_s: float
    wall_s: float
    latencies: list[float]
    errors: int

    @property
    def throughput(self) -> float:
        return self.audio_s / self.wall_s

    def pct(self, q: float) -> float:
        values = sorted(self.latencies)
        return values[min(len(values) - 1, round(q * (len(values) - 1)))] if values else float("nan")


def median_run(runs: list[Run]) -> Run:
    """The run with the median throughput."""
    return sorted(runs, key=lambda r: r.throughput)[len(runs) // 2]


def make_speech() -> list[tuple[str, np.ndarray, int]]:
    from hibari import Hibari

    tts = Hibari()
    return [(text, np.asarray(tts(text, seed=0), dtype=np.float32), int(tts.sample_rate)) for text in SENTENCES]


def request_body(text: str, audio: np.ndarray, rate: int) -> bytes:
    from audio_reward.protocol import encode_f32

    return json.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                       "num_samples": int(audio.shape[0]), "sample_rate": rate, "prompt": text,
                       "metadata": {}}).encode()


# -- the reference server: one transcribe at a time under a lock -----------------------------------
def locked_app(model_name: str, threads: int, device: str):  # type: ignore[no-untyped-def]
    import threading

    import soxr
    from fastapi import FastAPI
    from faster_whisper import WhisperModel

    from audio_reward.protocol import decode_f32
    from audio_reward.scorer_server.engines.model_store import resolve_ctranslate2_model
    from audio_reward.scoring import RewardPolicy, get_normalizer, score_transcript

    model = WhisperModel(resolve_ctranslate2_model(model_name).path, device=device, cpu_threads=threads)
    lock = threading.Lock()
    normalizer, policy = get_normalizer("basic"), RewardPolicy()
    app = FastAPI()

    @app.get("/readyz")
    def ready() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/score")
    def score(payload: dict) -> dict:  # type: ignore[type-arg]  # sync: FastAPI runs it in its thread pool
        audio = decode_f32(payload["waveform_f32_base64"])
        audio16 = soxr.resample(audio, payload["sample_rate"], 16_000).astype(np.float32)
        with lock:
            segments, _ = model.transcribe(audio16, language="en", beam_size=1, temperature=0.0,
                                           condition_on_previous_text=False, without_timestamps=True)
            text = "".join(s.text for s in segments).strip()
        result = score_transcript(payload["prompt"], text, normalizer=normalizer, policy=policy, language="en",
                                  duration_s=len(audio) / payload["sample_rate"], reference_duration_s=None)
        return result.response().model_dump(exclude_none=True)

    return app


def serve_locked(port: int, model_name: str, threads: int, device: str) -> None:
    import uvicorn

    uvicorn.run(locked_app(model_name, threads, device), host="127.0.0.1", port=port, log_level="warning")


# -- load generation -------------------------------------------------------------------------------
async def drive(url: str, bodies: list[tuple[bytes, float]], concurrency: int, total: int, name: str) -> Run:
    latencies: list[float] = []
    errors = 0
    audio_s = 0.0
    next_index = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def worker() -> None:
            nonlocal next_index, errors, audio_s
            while next_index < total:
                body, seconds = bodies[next_index % len(bodies)]
                next_index += 1
                t0 = time.perf_counter()
                r = await client.post(f"{url}/score", content=body, headers={"Content-Type": "application/json"})
                latencies.append(time.perf_counter() - t0)
                if r.status_code == 200 and "score" in r.json():
                    audio_s += seconds
                else:
                    errors += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return Run(name, concurrency, audio_s, wall, latencies, errors)


def start(cmd: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class EngineLimit:
    """The engine in-process on 16 kHz audio: audio seconds per second at each batch size."""

    def __init__(self, speech: list[tuple[str, np.ndarray, int]], model: str, threads: int, device: str) -> None:
        import soxr

        from audio_reward.scorer_server.engines import EngineConfig, TranscriptionInput
        from audio_reward.scorer_server.engines.faster_whisper_engine import (
            FasterWhisperEngine,
        )

        # Batched decoding (the default, named here): batch size N is one engine call over N utterances.
        config = EngineConfig(model=model, device=device, cpu_threads=threads, options={"batched": True})
        self.engine = FasterWhisperEngine(config)
        self.engine.load()
        self.engine.warmup()
        self.items = [TranscriptionInput(soxr.resample(a, r, 16_000).astype(np.float32), "en") for _, a, r in speech]
        self.best: dict[int, float] = {}

    def measure(self, batch_sizes: list[int]) -> None:
        """One pass per batch size; the best pass so far is kept (the least disturbed one)."""
        total = sum(i.duration_s for i in self.items) * 2
        for bs in batch_sizes:
            items = self.items * 2
            t0 = time.perf_counter()
            for k in range(0, len(items), bs):
                self.engine.transcribe_batch_sync(items[k:k + bs])
            self.best[bs] = max(self.best.get(bs, 0.0), total / (time.perf_counter() - t0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--device", default="cpu", help="cpu or cuda, for all three")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="engine threads, both servers")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=32, help="requests per run (at least the concurrency)")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--server-rounds", type=int, default=3, help="alternating runs per server and concurrency")
    parser.add_argument("--serve-locked", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_locked is not None:
        serve_locked(args.serve_locked, args.model, args.threads, args.device)
        return 0

    speech = make_speech()
    bodies = [(request_body(t, a, r), len(a) / r) for t, a, r in speech]
    print(f"{len(speech)} utterances, {sum(s for _, s in bodies):.1f} s of audio; model {args.model}, "
          f"{args.threads} engine threads, {os.cpu_count()} CPUs")

    batch_sizes = [1, 4, 8, 16]
    limit = EngineLimit(speech, args.model, args.threads, args.device)
    limit.measure(batch_sizes)

    servers = {
        "ours": [sys.executable, "-m", "audio_reward.cli", "serve", "--model", args.model,
                 "--device", args.device, "--cpu-threads", str(args.threads),
                 "--max-batch-size", str(args.max_batch_size), "--max-wait-ms", "5", "--language", "en"],
        "locked": [sys.executable, "-m", "bench.server_throughput", "--model", args.model, "--device", args.device,
                   "--threads", str(args.threads), "--serve-locked"],
    }
    urls: dict[str, str] = {}
    procs: list[subprocess.Popen[bytes]] = []
    runs: dict[tuple[str, int], list[Run]] = {}
    try:
        for name, cmd in servers.items():
            port = free_port()
            procs.append(start(cmd + ([str(port)] if name == "locked" else ["--port", str(port)])))
            urls[name] = f"http://127.0.0.1:{port}"
        for name, proc in zip(servers, procs, strict=True):
            wait_ready(urls[name], 180, proc=proc)
            asyncio.run(drive(urls[name], bodies, 1, 2, name))  # warm the connection and the model
        # Both servers stay up (idle costs nothing) and take turns, so load from anything
        # else on the machine hits both alike; the median round is reported.
        for c in args.concurrency:
            total = max(args.requests, c)
            for _ in range(args.server_rounds):
                for name in servers:
                    runs.setdefault((name, c), []).append(asyncio.run(drive(urls[name], bodies, c, total, name)))
            for name in servers:
                run = median_run(runs[(name, c)])
                print(f"{name:>6} c={c:<3} {run.throughput:6.2f} audio s / s   p50 {run.pct(0.5):6.2f} s   "
                      f"p99 {run.pct(0.99):6.2f} s   errors {sum(r.errors for r in runs[(name, c)])}", flush=True)
    finally:
        for proc in procs:
            stop_process(proc, grace_s=30)

    limit.measure(batch_sizes)  # again after the servers: the machine may have been busier before
    limit.engine.close()
    for bs, value in limit.best.items():
        print(f"engine in-process  batch {bs:>2}: {value:6.2f} audio s / s")
    best_bs = max(limit.best, key=limit.best.__getitem__)
    ceiling = limit.best[best_bs]
    print(f"engine limit: {ceiling:.2f} audio s / s at batch {best_bs}")

    print("\nconcurrency  ours/locked  ours/engine-limit")
    for c in args.concurrency:
        ours, locked = median_run(runs[("ours", c)]), median_run(runs[("locked", c)])
        print(f"{c:>11}  {ours.throughput / locked.throughput:11.2f}  {ours.throughput / ceiling:17.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
