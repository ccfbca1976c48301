"""Load run: many concurrent clients against a real scorer server on loopback.

    python -m bench.load [--requests 10000] [--concurrency 256] [--engine instant|tiny.en]
                         [--max-queue 512] [--json FILE] [--baseline CHECKOUT [--rounds 3]]

Starts ``audio-reward serve`` in its own process and sends ``--requests``
score requests, ``--concurrency`` at a time, through the project's
:class:`AsyncScorerClient` (retries off, so every request is one HTTP
exchange). Checks that every request is answered exactly once: each
request id comes back once, with the score of its own audio, and the
server's ``audio_reward_items_total{outcome="ok"}`` grows by exactly the
number of requests. Samples the server process's RSS every 20 ms, and prints
throughput, p50/p99 latency and peak RSS.

Engine: ``instant`` (the default) is the real server — uvicorn, the HTTP
routes, protocol decoding, the micro-batch scheduler, scoring — with an engine that
answers at once instead of running Whisper. On two CPU cores Whisper tiny.en
costs ~0.1–0.2 s per utterance whatever its length (it pads to 30 s), so
10,000 requests would take half an hour and measure only the model; the
point here is the server's queueing, batching and HTTP path. The instant
engine reads a number written into the first sample of each clip and
answers ``item <number>``, so a response carrying another request's
transcript scores below 1 and is caught. ``--engine tiny.en`` runs the
same check with the real model (use a few hundred requests).

``--baseline CHECKOUT`` compares: the same load against another checkout's
server (a ``git archive`` of main, say) and this one's, in turn, ``--rounds``
times each, in one run; it prints each run, the median throughputs and their
ratio.  Each server runs its own checkout's code.

The server side is ``python -m tests.testkit.instant_engine [--engine-delay-ms MS]
[serve flags…]``: ``audio-reward serve`` with the instant engine registered (the
reliability tests start it the same way). A clip numbered below zero is
poison: the engine call holding it raises, for fault tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.testkit.instant_engine import SAMPLE_RATE, clip, prompt_of
from tests.testkit.probes import RssSampler, items_ok, rss_bound_bytes
from tests.testkit.server import ServerHandle, running_server

REPO = Path(__file__).resolve().parents[1]


def scorer_server(
    engine: str, *, root: Path = REPO, **settings: Any
) -> contextlib.AbstractContextManager[ServerHandle]:
    """A ready server of ``root``'s checkout: the instant engine, or the model named ``engine``."""
    if engine == "instant":
        return running_server(instant=True, root=root, **settings)
    return running_server(model=engine, root=root, **settings)


@dataclass
class LoadReport:
    engine: str
    requests: int
    concurrency: int
    max_queue: int
    answered: int
    unique_ids: int
    wrong_answers: int
    errors: int
    error_kinds: dict[str, int]
    server_items_ok: int
    wall_s: float
    throughput_rps: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    rss_baseline_mib: float
    rss_peak_mib: float
    rss_bound_mib: float

    @property
    def answered_once(self) -> bool:
        """Every request answered, each id once, each with its own score, each scored once by the server."""
        return (self.answered == self.requests == self.unique_ids == self.server_items_ok
                and self.wrong_answers == 0 and self.errors == 0)

    @property
    def memory_bounded(self) -> bool:
        return self.rss_peak_mib <= self.rss_bound_mib

    def lines(self) -> list[str]:
        return [
            f"engine {self.engine}: {self.requests} requests at concurrency {self.concurrency} "
            f"(max_queue {self.max_queue})",
            f"answered {self.answered}, unique request ids {self.unique_ids}, wrong answers {self.wrong_answers}, "
            f"errors {self.errors} {self.error_kinds or ''}, scored by the server {self.server_items_ok}",
            f"answered exactly once: {'yes' if self.answered_once else 'NO'}",
            f"throughput {self.throughput_rps:.0f} req/s over {self.wall_s:.1f} s; "
            f"latency p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms, max {self.max_ms:.1f} ms",
            f"server RSS baseline {self.rss_baseline_mib:.0f} MiB, peak {self.rss_peak_mib:.0f} MiB, "
            f"bound {self.rss_bound_mib:.0f} MiB: {'within' if self.memory_bounded else 'EXCEEDED'}",
        ]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


async def drive(url: str, requests: int, concurrency: int, *, api_key: str | None = None,
                timeout: float = 60.0) -> tuple[list[float], dict[int, Any], float]:
    """Send ``requests`` score requests, ``concurrency`` in flight; returns latencies, results by index, wall time."""
    from audio_reward.scorer_client import AsyncScorerClient, ScorerError

    latencies: list[float] = []
    results: dict[int, Any] = {}
    next_index = iter(range(requests))
    async with AsyncScorerClient(url, api_key=api_key, max_retries=0, timeout=timeout,
                                 pool_limit=concurrency) as client:
        async def worker() -> None:
            for i in next_index:
                t0 = time.perf_counter()
                try:
                    results[i] = await client.score(clip(i), SAMPLE_RATE, prompt_of(i), request_id=f"load-{i}",
                                                    metadata={"index": i})
                except ScorerError as exc:
                    results[i] = exc
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
    return latencies, results, wall


def run_load(handle: ServerHandle, requests: int, concurrency: int, *, engine: str = "instant",
             api_key: str | None = None) -> LoadReport:
    """Drive ``handle``'s server and check every answer; see the module docstring."""
    import orjson

    from audio_reward.protocol import encode_f32
    from audio_reward.scorer_client import ScoreResult

    max_queue = int(handle.settings.get("max_queue", 512))
    body_bytes = len(orjson.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(clip(0)),
                                   "sample_rate": SAMPLE_RATE, "prompt": prompt_of(requests)}))
    before = items_ok(handle.url, api_key)
    with RssSampler(handle.pid) as rss:
        latencies, results, wall = asyncio.run(drive(handle.url, requests, concurrency, api_key=api_key))
    server_ok = items_ok(handle.url, api_key) - before
    ids: dict[str, int] = {}
    wrong = errors = 0
    kinds: dict[str, int] = {}
    for i, r in results.items():
        if isinstance(r, ScoreResult):
            ids[r.request_id] = ids.get(r.request_id, 0) + 1
            if r.request_id != f"load-{i}" or (engine == "instant" and r.score != 1.0):
                wrong += 1
        else:
            errors += 1
            kind = type(r).__name__
            kinds[kind] = kinds.get(kind, 0) + 1
    mib = 2**20
    return LoadReport(
        engine=engine, requests=requests, concurrency=concurrency, max_queue=max_queue,
        answered=sum(ids.values()), unique_ids=len(ids), wrong_answers=wrong, errors=errors, error_kinds=kinds,
        server_items_ok=server_ok, wall_s=wall, throughput_rps=requests / wall,
        p50_ms=percentile(latencies, 50) * 1000, p99_ms=percentile(latencies, 99) * 1000,
        max_ms=max(latencies) * 1000 if latencies else float("nan"),
        rss_baseline_mib=rss.baseline / mib, rss_peak_mib=rss.peak / mib,
        rss_bound_mib=rss_bound_bytes(rss.baseline, max_queue, body_bytes) / mib,
    )


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--engine", default="instant", help="instant (default) or a model name such as tiny.en")
    ap.add_argument("--max-queue", type=int, default=512)
    ap.add_argument("--max-batch-size", type=int, default=32)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--baseline", type=Path,
                    help="another checkout of audio-reward (a git archive of main, say): its server is loaded in "
                         "turn with this one's, and the throughput ratio is printed")
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs per server with --baseline (default 3)")
    args = ap.parse_args(argv)
    if args.concurrency < 1 or args.requests < 1 or args.rounds < 1:
        ap.error("--requests, --concurrency and --rounds must be positive")
    settings = {"max_queue": args.max_queue, "max_batch_size": args.max_batch_size, "max_wait_ms": 2}
    if args.baseline is not None:
        return compare(args.baseline.resolve(), args, settings)
    with scorer_server(args.engine, **settings) as handle:
        report = run_load(handle, args.requests, args.concurrency, engine=args.engine)
    print("\n".join(report.lines()))
    if args.json:
        args.json.write_text(json.dumps({**asdict(report), "answered_once": report.answered_once,
                                         "memory_bounded": report.memory_bounded}, indent=2))
    return 0 if report.answered_once and report.memory_bounded else 1


def compare(baseline: Path, args: argparse.Namespace, settings: dict[str, Any]) -> int:
    """Load this checkout's server and ``baseline``'s in turn, ``args.rounds`` times each; print medians and ratio."""
    if not (baseline / "bench" / "load.py").is_file() or not (baseline / "audio_reward").is_dir():
        print(f"load.py: {baseline} is not an audio-reward checkout", file=sys.stderr)
        return 2
    runs: dict[str, list[LoadReport]] = {"baseline": [], "this": []}
    for round_no in range(1, args.rounds + 1):
        for name, root in (("baseline", baseline), ("this", REPO)):
            with scorer_server(args.engine, root=root, **settings) as handle:
                report = run_load(handle, args.requests, args.concurrency, engine=args.engine)
            runs[name].append(report)
            print(f"round {round_no} {name:8s} {report.throughput_rps:7.0f} req/s  p50 {report.p50_ms:6.1f} ms  "
                  f"p99 {report.p99_ms:6.1f} ms  answered once: {'yes' if report.answered_once else 'NO'}", flush=True)
    med = {name: float(np.median([r.throughput_rps for r in reports])) for name, reports in runs.items()}
    ratio = med["this"] / med["baseline"]
    print(f"median throughput: baseline ({baseline}) {med['baseline']:.0f} req/s, this checkout ({REPO}) "
          f"{med['this']:.0f} req/s; ratio this/baseline {ratio:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"baseline": str(baseline), "median_rps": med, "ratio": ratio,
                                         "runs": {k: [asdict(r) for r in v] for k, v in runs.items()}}, indent=2))
    return 0 if all(r.answered_once for r in runs["this"]) else 1


if __name__ == "__main__":
    sys.exit(main())
