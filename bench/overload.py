"""A scorer under more load than it can keep up with: early refusal on against off.

Two ``audio-reward serve`` processes on the same model and a short ``--request-timeout-s`` (a timeout storm
on purpose): ``--no-early-refusal`` and the default.  Each gets, in interleaved rounds, ``--concurrency``
single requests at once and one ``score_many`` of ``--batch`` items in one chunk, all through the project's
client with its default retries, each item with its own request id.  Per server the bench prints how many
items ended with a score, the HTTP 504s and 429s the server answered, the utterances transcribed per item
(at most 1.0: none twice; counted on ``/metrics``), and the wall time; then the ratio of wall times.

Each server first scores four requests one after another, as a server that has been serving has measured
its throughput (before its first engine calls it admits everything).  Both servers answer batches
partially and keep what finished, so the difference between the two is the early refusal alone.

    python -m bench.overload [--model tiny.en] [--request-timeout-s 5] [--concurrency 32] [--batch 13]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

from audio_reward.scorer_client import AsyncScorerClient, ScoreItem, ScorerError, ScoreResult
from bench.server_throughput import SENTENCES, make_speech, start
from tests.testkit.probes import read_metrics
from tests.testkit.server import free_port, stop_process, wait_ready


def counters(url: str) -> dict[str, float]:
    metrics = read_metrics(url)
    requests = {k: v for k, v in metrics.items() if k.startswith("audio_reward_requests_total")}
    return {"calls": metrics.get("audio_reward_batch_size_count{}", 0.0),
            "utterances": metrics.get("audio_reward_batch_size_sum{}", 0.0),
            "504": sum(v for k, v in requests.items() if 'status="504"' in k),
            "429": sum(v for k, v in requests.items() if 'status="429"' in k)}


async def load(url: str, speech: list[tuple[str, Any, int]], concurrency: int, batch: int, tag: str) -> int:
    """Every item once through the client (default retries); how many ended with a score."""
    def item(i: int) -> ScoreItem:
        text, audio, rate = speech[i % len(speech)]
        return ScoreItem(audio, rate, text, request_id=f"{tag}-batch-{i}")

    async with AsyncScorerClient(url) as client:
        async def single(i: int) -> Any:
            text, audio, rate = speech[i % len(speech)]
            try:
                return await client.score(audio, rate, text, request_id=f"{tag}-single-{i}")
            except ScorerError as exc:  # a failure is counted, not raised: the bench reports it
                return exc

        singles = asyncio.gather(*(single(i) for i in range(concurrency)))
        many = client.score_many([item(i) for i in range(batch)], chunk_size=batch)
        results = [*await singles, *await many]
    return sum(isinstance(r, ScoreResult) for r in results)


async def warm(url: str, speech: list[tuple[str, Any, int]]) -> None:
    """A few requests one after another: a server that has been serving has measured its throughput."""
    async with AsyncScorerClient(url) as client:
        for text, audio, rate in speech[:4]:
            await client.score(audio, rate, text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--request-timeout-s", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--batch", type=int, default=13)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    speech = make_speech()
    base = [sys.executable, "-m", "audio_reward.cli", "serve", "--model", args.model, "--cpu-threads",
            str(args.threads), "--language", "en", "--request-timeout-s", str(args.request_timeout_s)]
    names = {"off": ["--no-early-refusal"], "on": []}
    urls, procs = {}, {}
    items = args.concurrency + args.batch
    try:
        for name, extra in names.items():
            port = free_port()
            procs[name] = start([*base, "--port", str(port), *extra])
            urls[name] = f"http://127.0.0.1:{port}"
        for name, proc in procs.items():
            wait_ready(urls[name], 180, proc=proc)
            asyncio.run(warm(urls[name], speech))
        print(f"model {args.model}, {args.threads} threads, {len(SENTENCES)} hibari clips, request timeout "
              f"{args.request_timeout_s:g} s; per round {args.concurrency} single requests at once and one "
              f"score_many of {args.batch}; client defaults (3 retries); {args.rounds} interleaved rounds")
        print("| early refusal | scored | HTTP 504 | HTTP 429 | transcribed per item | wall s (median) |")
        print("|---|---|---|---|---|---|")
        walls: dict[str, list[float]] = {name: [] for name in names}
        totals: dict[str, dict[str, float]] = {name: {"scored": 0} for name in names}
        for r in range(args.rounds):
            for name in names if r % 2 == 0 else reversed(list(names)):
                before = counters(urls[name])
                started = time.monotonic()
                scored = asyncio.run(load(urls[name], speech, args.concurrency, args.batch, f"r{r}"))
                walls[name].append(time.monotonic() - started)
                time.sleep(args.request_timeout_s)  # work left running after a timeout lands in the counts
                after = counters(urls[name])
                for key in after:
                    totals[name][key] = totals[name].get(key, 0.0) + after[key] - before[key]
                totals[name]["scored"] += scored
        for name in names:
            t = totals[name]
            print(f"| {name} | {int(t['scored'])} of {items * args.rounds} | {int(t['504'])} | {int(t['429'])} "
                  f"| {t['utterances'] / (items * args.rounds):.2f} | {statistics.median(walls[name]):.1f} |")
        print(f"wall time, on / off: {statistics.median(walls['on']) / statistics.median(walls['off']):.2f}x")
    finally:
        for proc in procs.values():
            stop_process(proc, grace_s=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
