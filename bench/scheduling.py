"""The scheduler itself: achieved throughput against each engine model's analytic optimum.

    python -m bench.scheduling [--window-s 10] [--concurrency 1 8 32 128 256] [--json FILE]

Runs the real server (``audio-reward serve`` in its own process, uvicorn, the
HTTP routes, protocol decoding, the scheduler, scoring) on loopback with
synthetic engines registered the way the reliability suite registers its
instant engine (``python -m bench.scheduling serve --engine NAME ...``).  Each
engine sleeps instead of computing, releasing the GIL as a GPU kernel does,
so what is measured is how well the server keeps the device busy, not the
machine's CPUs:

- ``batch-cost``: one engine call over n clips totalling S seconds sleeps
  ``fixed + per_item·n + per_audio_s·S``; it takes at most ``max_batch``
  clips per call (a device's memory).  Served by the micro-batch scheduler with two
  batches in flight, as on a GPU.  Optimum at concurrency c: batches of
  b = min(c, max_batch) mean-length clips back to back, b·s̄ / cost(b).
- ``self-scheduling``: each clip takes ``base + per_audio_s·s``, at most
  ``capacity`` at once, as vLLM's continuous batching behaves.  Capacity at
  concurrency c: min(c, capacity)·s̄ / (base + per_audio_s·s̄).
- ``lock``: verl-omni's reference design, one clip at a time under a lock,
  each call costing the batch-cost engine's cost(1).

Every request carries a distinct clip, 1-20 s long (uniform, seeded), sent
as verl-omni's float32 base64 request; the engines answer ``item <n>`` read
from the clip's first sample, so a transcript that reached the wrong
request scores below 1 and is counted as an error.  Each concurrency level
gets a fresh server; the clients run closed-loop for a warm-up, then a
``--window-s`` window in which completions are counted.

Printed per engine and concurrency: audio seconds per second achieved, the
optimum, their ratio, and p50/p99 of the latency minus the engine's own
latency for that clip alone (cost(1, s) or base + per_audio_s·s): what the
server adds, including time queued behind other clips.  The last line is
one JSON object with the target ratios; the exit status is 1 when a target
is missed:

- batch-cost at concurrency >= 32: >= 0.9 of the optimum;
- self-scheduling at 256: >= 0.95 of the capacity;
- added p50 at concurrency 1 (the worst of the three engines): <= 5 ms;
- batch-cost at 32: >= 3x the lock baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from audio_reward.scorer_server.engines.base import (
    ASREngine,
    EngineInfo,
    EngineOption,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
    resolve_engine_options,
)
from tests.testkit.instant_engine import SAMPLE_RATE, index_of, prompt_of, watermark
from tests.testkit.server import free_port, settings_to_flags, stop_process, wait_ready
from tests.testkit.speech import tone

REPO = Path(__file__).resolve().parents[1]

MIN_CLIP_S, MAX_CLIP_S = 1.0, 20.0
CONCURRENCY = (1, 8, 32, 128, 256)

# The engine models (milliseconds); the server gets them as --engine-option, the analysis uses the same numbers.
BATCH_COST = {"fixed_ms": 100.0, "per_item_ms": 2.0, "per_audio_s_ms": 2.0, "max_batch": 16}
SELF_SCHEDULING = {"base_ms": 500.0, "per_audio_s_ms": 30.0, "capacity": 32}

TARGETS = {
    "batch_cost_vs_optimum_c32": (">=", 0.9),
    "batch_cost_vs_optimum_c256": (">=", 0.9),
    "self_scheduling_vs_capacity_c256": (">=", 0.95),
    "added_p50_ms_c1": ("<=", 5.0),
    "batch_cost_vs_lock_c32": (">=", 3.0),
}


def transcript_of(item: TranscriptionInput) -> Transcription:
    return Transcription(prompt_of(index_of(item.audio)))


def batch_cost_s(options: dict[str, Any], n: int, audio_s: float) -> float:
    return (options["fixed_ms"] + options["per_item_ms"] * n + options["per_audio_s_ms"] * audio_s) / 1000.0


def self_scheduling_s(options: dict[str, Any], audio_s: float) -> float:
    return (options["base_ms"] + options["per_audio_s_ms"] * audio_s) / 1000.0


# --------------------------------------------------------------------------- synthetic engines (server side)

class BatchCostEngine(ThreadedEngine):
    """One call sleeps ``fixed + per_item·n + per_audio_s·seconds``, at most ``max_batch`` clips."""

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "fixed_ms": EngineOption(float, BATCH_COST["fixed_ms"], "cost of one call"),
        "per_item_ms": EngineOption(float, BATCH_COST["per_item_ms"], "cost per clip"),
        "per_audio_s_ms": EngineOption(float, BATCH_COST["per_audio_s_ms"], "cost per second of audio"),
        "max_batch": EngineOption(int, BATCH_COST["max_batch"], "most clips per call"),
    }

    def __init__(self, config: Any = None) -> None:
        super().__init__(workers=1)
        self.options = resolve_engine_options("bench-batch-cost", self.OPTIONS, getattr(config, "options", {}))
        self.info = EngineInfo("bench-batch-cost", "synthetic", device="cuda")  # stands in for a GPU model

    def load(self) -> None:
        """Nothing to load."""

    def warmup(self) -> None:
        """Nothing to warm up."""

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        if len(batch) > self.options["max_batch"]:
            raise RuntimeError(f"{len(batch)} clips exceed the engine's batch of {self.options['max_batch']}")
        time.sleep(batch_cost_s(self.options, len(batch), sum(item.duration_s for item in batch)))
        return [transcript_of(item) for item in batch]


class LockEngine(BatchCostEngine):
    """verl-omni's reference design: one clip per call under a lock, cost(1) each."""

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self._lock = threading.Lock()
        self.info = EngineInfo("bench-lock", "synthetic", device="cuda")

    @property
    def prefers_batches(self) -> bool:
        return False

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        out = []
        for item in batch:
            with self._lock:
                time.sleep(batch_cost_s(self.options, 1, item.duration_s))
            out.append(transcript_of(item))
        return out


class SelfSchedulingEngine(ASREngine):
    """Each clip takes ``base + per_audio_s·s``, ``capacity`` at once; more wait inside, as in vLLM."""

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "base_ms": EngineOption(float, SELF_SCHEDULING["base_ms"], "latency of one clip"),
        "per_audio_s_ms": EngineOption(float, SELF_SCHEDULING["per_audio_s_ms"], "latency per second of audio"),
        "capacity": EngineOption(int, SELF_SCHEDULING["capacity"], "clips in flight at once (max_num_seqs)"),
    }

    def __init__(self, config: Any = None) -> None:
        self.options = resolve_engine_options("bench-self-scheduling", self.OPTIONS, getattr(config, "options", {}))
        self.info = EngineInfo("bench-self-scheduling", "synthetic", device="cuda")
        self._slots: asyncio.Semaphore | None = None

    schedules_itself = True

    @property
    def max_concurrency(self) -> int:
        return int(self.options["capacity"])

    def load(self) -> None:
        """Nothing to load."""

    def warmup(self) -> None:
        """Nothing to warm up."""

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)

        async def one(item: TranscriptionInput) -> Transcription:
            assert self._slots is not None
            async with self._slots:
                await asyncio.sleep(self_scheduling_s(self.options, item.duration_s))
            return transcript_of(item)

        return list(await asyncio.gather(*(one(item) for item in batch)))


ENGINE_CLASSES = {"batch-cost": "BatchCostEngine", "self-scheduling": "SelfSchedulingEngine", "lock": "LockEngine"}


def serve_main(argv: Sequence[str]) -> int:
    """``audio-reward serve`` with the synthetic engines registered as ``bench-<name>``."""
    from audio_reward.cli import main
    from audio_reward.scorer_server.engines import registry

    module = sys.modules[__name__].__name__
    for name, cls in ENGINE_CLASSES.items():
        registry.ENGINES[f"bench-{name}"] = f"{module}:{cls}"
    return main(["serve", *argv])


# --------------------------------------------------------------------------- load generator (client side)

@dataclass
class Done:
    finished_at: float
    latency_s: float
    audio_s: float
    engine_s: float  # the engine's own latency for this clip alone
    ok: bool


@dataclass
class Level:
    engine: str
    concurrency: int
    achieved: float  # audio seconds per second
    optimum: float
    added_p50_ms: float
    added_p99_ms: float
    completed: int
    errors: int
    mean_clip_s: float
    error_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.achieved / self.optimum if self.optimum else float("nan")


class Clips:
    """Distinct 1-20 s clips, encoded on demand from one precomputed tone."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self._tone = tone(MAX_CLIP_S, rate=SAMPLE_RATE)
        self._next = 0

    def body(self) -> tuple[bytes, float]:
        import orjson

        from audio_reward.protocol import encode_f32

        index = self._next
        self._next += 1
        seconds = float(self._rng.uniform(MIN_CLIP_S, MAX_CLIP_S))
        audio = watermark(self._tone[: int(seconds * SAMPLE_RATE)].copy(), index)
        body = orjson.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                             "num_samples": int(audio.shape[0]), "sample_rate": SAMPLE_RATE,
                             "prompt": prompt_of(index)})
        return body, audio.shape[0] / SAMPLE_RATE


def own_latency_s(engine: str, audio_s: float) -> float:
    if engine == "self-scheduling":
        return self_scheduling_s(SELF_SCHEDULING, audio_s)
    return batch_cost_s(BATCH_COST, 1, audio_s)


def optimum(engine: str, concurrency: int, mean_s: float) -> float:
    """The engine model's best audio seconds per second at this concurrency."""
    if engine == "self-scheduling":
        return min(concurrency, SELF_SCHEDULING["capacity"]) * mean_s / self_scheduling_s(SELF_SCHEDULING, mean_s)
    b = 1 if engine == "lock" else min(concurrency, int(BATCH_COST["max_batch"]))
    return b * mean_s / batch_cost_s(BATCH_COST, b, b * mean_s)


async def drive(url: str, engine: str, concurrency: int, warmup_s: float, window_s: float) -> list[Done]:
    """Closed loop: ``concurrency`` clients send until the window closes; returns completions in the window."""
    import aiohttp
    import orjson

    clips = Clips(seed=concurrency)
    done: list[Done] = []
    start = time.perf_counter()
    window = (start + warmup_s, start + warmup_s + window_s)
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def client() -> None:
            while time.perf_counter() < window[1]:
                body, audio_s = clips.body()
                t0 = time.perf_counter()
                ok = False
                try:
                    async with session.post(f"{url}/v1/score", data=body,
                                            headers={"Content-Type": "application/json"}) as resp:
                        payload = await resp.read()
                    ok = resp.status == 200 and orjson.loads(payload).get("score") == 1.0
                except aiohttp.ClientError:
                    ok = False
                t1 = time.perf_counter()
                if window[0] <= t1 <= window[1]:
                    done.append(Done(t1, t1 - t0, audio_s, own_latency_s(engine, audio_s), ok))

        tasks = [asyncio.create_task(client()) for _ in range(concurrency)]
        # Clients still waiting when the window closes are abandoned: the server is stopped next.
        await asyncio.sleep(max(0.0, window[1] - time.perf_counter()) + 0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return done


def server_settings(engine: str) -> dict[str, Any]:
    common = {"max_queue": 2048, "request_timeout_s": 600, "shutdown_grace_s": 0, "dedup_cache_size": 0,
              "max_audio_seconds": MAX_CLIP_S + 1, "log_level": "warning"}
    if engine == "batch-cost":
        return {**common, "max_batch_size": int(BATCH_COST["max_batch"]), "max_wait_ms": 10,
                "max_batches_in_flight": 2}
    return common


def engine_option_flags(engine: str) -> list[str]:
    options = SELF_SCHEDULING if engine == "self-scheduling" else BATCH_COST
    return [arg for key, value in options.items() for arg in ("--engine-option", f"{key}={value}")]


def run_level(engine: str, concurrency: int, window_s: float) -> Level:
    import subprocess

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = {**server_settings(engine), "host": "127.0.0.1", "port": port}
    cmd = [sys.executable, "-m", "bench.scheduling", "serve", "--engine", f"bench-{engine}",
           *settings_to_flags(settings), *engine_option_flags(engine)]
    with tempfile.TemporaryDirectory(prefix="audio-reward-sched-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(url, 60, proc=proc, log_path=log_path)
            check_info(url, engine)
            per_request = own_latency_s(engine, (MIN_CLIP_S + MAX_CLIP_S) / 2)
            rate = optimum(engine, concurrency, (MIN_CLIP_S + MAX_CLIP_S) / 2) / ((MIN_CLIP_S + MAX_CLIP_S) / 2)
            # Long enough for every client to have been answered once, within reason.
            warmup_s = min(6.0, max(1.5, concurrency / rate + per_request))
            done = asyncio.run(drive(url, engine, concurrency, warmup_s, window_s))
        finally:
            stop_process(proc)
    good = [d for d in done if d.ok]
    errors = len(done) - len(good)
    mean_s = statistics.fmean(d.audio_s for d in good) if good else (MIN_CLIP_S + MAX_CLIP_S) / 2
    added = [(d.latency_s - d.engine_s) * 1000 for d in good]
    return Level(
        engine=engine,
        concurrency=concurrency,
        achieved=sum(d.audio_s for d in good) / window_s,
        optimum=optimum(engine, concurrency, mean_s),
        added_p50_ms=float(np.percentile(added, 50)) if added else float("nan"),
        added_p99_ms=float(np.percentile(added, 99)) if added else float("nan"),
        completed=len(good),
        errors=errors,
        mean_clip_s=mean_s,
    )


def check_info(url: str, engine: str) -> None:
    """The server runs the engine model the analysis assumes (its --engine-option values)."""
    import httpx

    info = httpx.get(f"{url}/v1/info", timeout=10).json()
    want = SELF_SCHEDULING if engine == "self-scheduling" else BATCH_COST
    got = info["engine"]["options"]
    if any(float(got[k]) != float(v) for k, v in want.items()):
        raise SystemExit(f"the server's engine options {got} are not the bench's {want}")


def summary(levels: list[Level]) -> dict[str, Any]:
    by = {(lv.engine, lv.concurrency): lv for lv in levels}

    def get(engine: str, c: int) -> Level | None:
        return by.get((engine, c))

    out: dict[str, Any] = {}
    for c in (32, 128, 256):
        if (lv := get("batch-cost", c)) is not None:
            out[f"batch_cost_vs_optimum_c{c}"] = round(lv.ratio, 3)
    if (lv := get("self-scheduling", 256)) is not None:
        out["self_scheduling_vs_capacity_c256"] = round(lv.ratio, 3)
    c1 = [lv.added_p50_ms for lv in levels if lv.concurrency == 1]
    if c1:
        out["added_p50_ms_c1"] = round(max(c1), 2)
    batch, lock = get("batch-cost", 32), get("lock", 32)
    if batch is not None and lock is not None and lock.achieved:
        out["batch_cost_vs_lock_c32"] = round(batch.achieved / lock.achieved, 2)
    out["errors"] = sum(lv.errors for lv in levels)
    return out


def missed_targets(result: dict[str, Any]) -> list[str]:
    missed = []
    for key, (op, bound) in TARGETS.items():
        value = result.get(key)
        if value is None:
            continue
        if (op == ">=" and not value >= bound) or (op == "<=" and not value <= bound):
            missed.append(f"{key} = {value} (target {op} {bound})")
    if result.get("errors"):
        missed.append(f"{result['errors']} requests failed or got another request's transcript")
    return missed


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        return serve_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", nargs="+", default=list(ENGINE_CLASSES), choices=list(ENGINE_CLASSES))
    ap.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    ap.add_argument("--window-s", type=float, default=10.0, help="measuring window per level, after warm-up")
    ap.add_argument("--json", type=Path, default=None, help="also write every level's numbers here")
    args = ap.parse_args()

    print(f"batch-cost engine {BATCH_COST}; self-scheduling engine {SELF_SCHEDULING}; clips "
          f"{MIN_CLIP_S:g}-{MAX_CLIP_S:g} s; window {args.window_s:g} s per level", flush=True)
    print(f"{'engine':16} {'conc':>5} {'audio s/s':>10} {'optimum':>9} {'ratio':>6} "
          f"{'added p50 ms':>13} {'added p99 ms':>13} {'done':>6} {'errors':>6}", flush=True)
    levels = []
    for engine in args.engines:
        for c in args.concurrency:
            lv = run_level(engine, c, args.window_s)
            levels.append(lv)
            print(f"{engine:16} {c:>5} {lv.achieved:>10.1f} {lv.optimum:>9.1f} {lv.ratio:>6.2f} "
                  f"{lv.added_p50_ms:>13.1f} {lv.added_p99_ms:>13.1f} {lv.completed:>6} {lv.errors:>6}", flush=True)
    result = summary(levels)
    if args.json is not None:
        args.json.write_text(json.dumps({"levels": [lv.__dict__ for lv in levels], "summary": result}, indent=1))
    missed = missed_targets(result)
    for line in missed:
        print(f"missed: {line}", flush=True)
    print(json.dumps(result), flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
