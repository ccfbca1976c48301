"""Per-request client overhead on loopback, ours against plain aiohttp loops.

An instant server (a separate process, so it does not share the client's
core) answers every score request with a fixed valid result without
decoding anything.  Each client scores the same waveform sequentially; the
time per request is client overhead plus the loopback round trip, the same
for all of them.  Variants, measured side by side in interleaved rounds:

- ``ours``: ``AsyncScorerClient.score`` (validation, orjson body, retries armed,
  response checked against protocol v1).
- ``plain-shared``: verl-omni's reference client pattern: one shared
  ``aiohttp.ClientSession``, ``json=`` body built with ``json.dumps`` and
  ``base64.b64encode`` per call, ``response.json()``.
- ``plain-per-call``: the same with a new session per call (what a naive
  client does).
- ``ours-batch``: ``score_many`` with batches of 16, per item.

    python -m bench.client_overhead [--seconds 1.0] [--requests 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import multiprocessing
import socket
import statistics
import time
from typing import Awaitable, Callable

import aiohttp
import numpy as np

RESULT = {"score": 0.95, "cer": 0.01, "wer": 0.02, "transcript": "the quick brown fox",
          "normalized_transcript": "the quick brown fox", "normalized_reference": "the quick brown fox",
          "duration_s": 1.0, "duration_ratio": 1.0, "model": "instant", "protocol_version": "1"}


def serve(port: int, ready: "multiprocessing.synchronize.Event") -> None:
    from aiohttp import web

    single = json.dumps(RESULT).encode()

    async def score(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=single, content_type="application/json")

    async def batch(request: web.Request) -> web.Response:
        # Count the items without parsing the body: the server must stay instant.
        n = (await request.read()).count(b'"prompt":')
        body = json.dumps({"protocol_version": "1", "results": [RESULT] * n}).encode()
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application(client_max_size=1 << 28)
        app.router.add_post("/score", score)
        app.router.add_post("/v1/score", score)
        app.router.add_post("/v1/score/batch", batch)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def plain_payload(waveform: np.ndarray, rate: int, text: str) -> dict:
    arr = np.asarray(waveform, dtype="<f4").reshape(-1)
    return {"protocol_version": "1", "waveform_f32_base64": base64.b64encode(arr.tobytes()).decode("ascii"),
            "num_samples": int(arr.size), "sample_rate": rate, "prompt": text, "metadata": {}}


async def run(url: str, seconds: float, requests: int, rounds: int) -> dict[str, list[float]]:
    from audio_reward.scorer_client import AsyncScorerClient, ScoreItem

    rate = 24_000
    wav = (0.1 * np.sin(np.arange(int(seconds * rate)) / 10)).astype(np.float32)
    text = "the quick brown fox"
    ours = AsyncScorerClient(url, timeout=30)
    shared = aiohttp.ClientSession()

    async def call_ours() -> None:
        await ours.score(wav, rate, text)

    async def call_shared() -> None:
        async with shared.post(url + "/score", json=plain_payload(wav, rate, text),
                               timeout=aiohttp.ClientTimeout(total=30)) as resp:
            out = await resp.json(content_type=None)
        assert out["score"] == 0.95

    async def call_per_call() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.post(url + "/score", json=plain_payload(wav, rate, text),
                                    timeout=aiohttp.ClientTimeout(total=30)) as resp:
                out = await resp.json(content_type=None)
        assert out["score"] == 0.95

    batch_items = [ScoreItem(wav, rate, text) for _ in range(16)]

    async def call_batch() -> None:
        await ours.score_many(batch_items, chunk_size=16, concurrency=1)

    variants: dict[str, tuple[Callable[[], Awaitable[None]], int]] = {
        "ours": (call_ours, 1), "plain-shared": (call_shared, 1), "plain-per-call": (call_per_call, 1),
        "ours-batch": (call_batch, 16),
    }
    per_request: dict[str, list[float]] = {name: [] for name in variants}
    for fn, _ in variants.values():  # warm up connections and caches
        for _ in range(5):
            await fn()
    for _ in range(rounds):
        for name, (fn, items) in variants.items():
            calls = max(1, requests // items)
            for _ in range(calls):
                start = time.perf_counter()
                await fn()
                per_request[name].append((time.perf_counter() - start) / items)
    await ours.aclose()
    await shared.close()
    return per_request


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, nargs="+", default=[1.0, 10.0], help="audio length(s) to test")
    parser.add_argument("--requests", type=int, default=200, help="requests per variant per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ready = multiprocessing.Event()
    server = multiprocessing.Process(target=serve, args=(port, ready), daemon=True)
    server.start()
    try:
        if not ready.wait(30):
            raise SystemExit("the instant server did not start")
        url = f"http://127.0.0.1:{port}"
        for seconds in args.seconds:
            times = asyncio.run(run(url, seconds, args.requests, args.rounds))
            med = {name: statistics.median(v) * 1e6 for name, v in times.items()}
            print(f"\naudio {seconds:g} s at 24 kHz, {args.rounds} rounds x {args.requests} requests, loopback")
            print(f"{'client':<16}{'median us/request':>20}{'vs plain-shared':>18}{'vs plain-per-call':>20}")
            for name, value in med.items():
                print(f"{name:<16}{value:>20.0f}{value / med['plain-shared']:>17.2f}x"
                      f"{value / med['plain-per-call']:>19.2f}x")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
