"""Faults under load: a killed server, a failing engine, a slow engine.

Each test runs a real ``audio-reward serve`` process with the instant engine
of ``tests/testkit/instant_engine.py`` (answers ``item <n>`` for the clip numbered n; a clip
numbered below zero makes its engine call raise; ``delay_ms`` slows every
engine call), so each fault happens on cue while the HTTP server, scheduler
and scoring are the real ones. Results are checked item by item: the right
request id and a score of 1.0, which only the item's own transcript gives.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from audio_reward.protocol import ErrorResponse, encode_f32
from audio_reward.scorer_client import (
    AsyncScorerClient,
    ScoreItem,
    ScorerError,
    ScoreResult,
    ScorerUnavailableError,
    TransientServerError,
)
from tests.testkit.instant_engine import SAMPLE_RATE, clip, prompt_of
from tests.testkit.probes import RssSampler, items_ok, read_metrics, rss_bound_bytes
from tests.testkit.server import free_port, launch, running_server, wait_ready

from .budget import KILL_ITEMS

RATE = SAMPLE_RATE


def _check_results(results: list[Any], indices: list[int], prefix: str) -> list[str]:
    """Every way the results (``results[k]`` for item ``indices[k]``) differ from 'each item scored once, correctly'."""
    problems = []
    seen: dict[str, int] = {}
    for i, r in zip(indices, results, strict=True):
        if not isinstance(r, ScoreResult):
            problems.append(f"item {i}: {type(r).__name__}: {r}")
            continue
        seen[r.request_id] = seen.get(r.request_id, 0) + 1
        if r.request_id != f"{prefix}-{i}" or r.score != 1.0 or r.diagnostics.get("transcript") != prompt_of(i):
            problems.append(f"item {i}: wrong answer {r}")
    problems += [f"request id {rid} answered {n} times" for rid, n in seen.items() if n != 1]
    return problems


# --------------------------------------------------------------------------- SIGKILL and restart

def test_sigkill_and_restart_under_load_loses_nothing(tmp_path: Path) -> None:
    """The server is SIGKILLed twice mid-run and restarted on the same port; the client's
    retries carry every item through: each scored once (one result, its own), none lost."""
    n = KILL_ITEMS
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = {"host": "127.0.0.1", "port": port, "max_batch_size": 4, "max_wait_ms": 2}
    log = tmp_path / "server.log"
    # 100 ms per engine call of at most 4 clips: ~40 items/s, so a run outlasts two restarts.
    restart = lambda: launch(settings, log, instant=True, delay_ms=100)  # noqa: E731
    proc = restart()
    wait_ready(url, 60, proc=proc, log_path=log)
    singles = list(range(n // 2))
    batched = list(range(n // 2, n))
    out: dict[str, Any] = {}

    async def run() -> None:
        # 40 retries at up to 1 s apart outlast a restart that takes 15 s on a loaded machine (at 0.5 s they
        # gave up after about 13 s there); the deadline still bounds the run
        async with AsyncScorerClient(url, max_retries=40, backoff=0.05, backoff_max=1.0, timeout=10,
                                     deadline=120, concurrency=4, chunk_size=4) as client:
            async def one(i: int) -> Any:
                try:
                    return await client.score(clip(i), RATE, prompt_of(i), request_id=f"kill-{i}")
                except ScorerError as exc:
                    return exc

            many = client.score_many([ScoreItem(clip(i), RATE, prompt_of(i), request_id=f"kill-{i}")
                                      for i in batched])
            out["singles"], out["batched"] = await asyncio.gather(asyncio.gather(*map(one, singles)), many)

    runner = threading.Thread(target=lambda: asyncio.run(run()), name="kill-test-client")
    runner.start()
    scored_before_kill = []
    try:
        for _ in range(2):
            deadline = time.monotonic() + 60
            # Kill once this incarnation has scored a quarter of the items: mid-run, with work in flight.
            while time.monotonic() < deadline:
                try:
                    done = items_ok(url)
                except Exception:  # noqa: BLE001 - the metrics read races the restart
                    done = 0
                if done >= n // 4:
                    break
                time.sleep(0.02)
            scored_before_kill.append(done)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            time.sleep(0.3)  # the client sees refused connections for a while
            proc = restart()
            wait_ready(url, 60, proc=proc, log_path=log)
        runner.join(180)
        assert not runner.is_alive(), "the client did not finish"
        scored_after_restarts = items_ok(url)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert len(scored_before_kill) == 2 and all(0 < s < n for s in scored_before_kill), scored_before_kill
    assert scored_after_restarts > 0, "nothing was left to score after the restarts: the kills were not mid-run"
    problems = _check_results(out["singles"], singles, "kill") + _check_results(out["batched"], batched, "kill")
    assert not problems, "\n".join(problems[:20])


# --------------------------------------------------------------------------- engine exception

def test_engine_exception_fails_only_its_batch_and_server_stays_up() -> None:
    good = list(range(40))
    with running_server(instant=True, delay_ms=50, max_batch_size=8, max_wait_ms=20) as h:
        async def run(max_retries: int) -> tuple[list[Any], Any]:
            # The poison clip is sent once (a retry would poison another batch); good clips with ``max_retries``.
            async with AsyncScorerClient(h.url, max_retries=max_retries, backoff=0.01, timeout=10) as client, \
                    AsyncScorerClient(h.url, max_retries=0, timeout=10) as once:
                async def one(i: int, delay: float = 0.0) -> Any:
                    await asyncio.sleep(delay)
                    try:
                        return await (once if i < 0 else client).score(clip(i), RATE, prompt_of(i),
                                                                       request_id=f"eng-{i}")
                    except ScorerError as exc:
                        return exc

                # The poison clip arrives while the good ones are queued, so it shares a batch with some.
                results = await asyncio.gather(*map(one, good), one(-1, 0.06))
                return list(results[:-1]), results[-1]

        failures_before = read_metrics(h.url).get("audio_reward_engine_failures_total{}", 0)
        results, poison = asyncio.run(run(max_retries=0))
        assert isinstance(poison, ScorerUnavailableError)
        cause = poison.last_cause
        assert isinstance(cause, TransientServerError) and cause.status == 500 and cause.code == "engine_error"
        failed = [i for i, r in zip(good, results, strict=True) if not isinstance(r, ScoreResult)]
        # Only the poison clip's batch-mates failed, each with the same retryable engine_error.
        assert len(failed) <= 7, failed
        for i in failed:
            c = results[i].last_cause
            assert isinstance(c, TransientServerError) and c.code == "engine_error", results[i]
        ok = [i for i in good if i not in failed]
        assert not _check_results([results[i] for i in ok], ok, "eng")
        assert read_metrics(h.url)["audio_reward_engine_failures_total{}"] == failures_before + 1

        # The server stays up: the next request succeeds, and with retries every good item does.
        results, poison = asyncio.run(run(max_retries=3))
        assert isinstance(poison, ScorerUnavailableError) and poison.attempts == 1
        assert not _check_results(results, good, "eng")
        assert h.proc.poll() is None


# --------------------------------------------------------------------------- slow engine

async def _raw_flood(url: str, bodies: list[bytes], concurrency: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Send each body once, ``concurrency`` at a time, no retries; return (status, headers, body)."""
    out: list[tuple[int, dict[str, str], bytes]] = []
    queue = iter(bodies)
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def worker() -> None:
            for body in queue:
                async with session.post(f"{url}/v1/score", data=body,
                                        headers={"Content-Type": "application/json"}) as resp:
                    out.append((resp.status, dict(resp.headers), await resp.read()))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


def _body(i: int, seconds: float = 1.0) -> bytes:
    return orjson.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(clip(i, seconds)),
                         "sample_rate": RATE, "prompt": prompt_of(i), "request_id": f"flood-{i}"})


def test_slow_engine_gives_429_with_retry_after_and_a_bounded_queue() -> None:
    max_queue, concurrency, total = 16, 128, 800
    with running_server(instant=True, delay_ms=250, max_batch_size=4, max_queue=max_queue, max_wait_ms=1,
                             request_timeout_s=5) as h:
        depths: list[float] = []
        stop = threading.Event()

        def watch_queue() -> None:
            while not stop.is_set():
                depths.append(read_metrics(h.url).get("audio_reward_queue_depth{}", 0.0))
                stop.wait(0.05)

        bodies = [_body(i) for i in range(total)]
        watcher = threading.Thread(target=watch_queue, name="queue-watch")
        with RssSampler(h.pid) as rss:
            watcher.start()
            try:
                answers = asyncio.run(_raw_flood(h.url, bodies, concurrency))
            finally:
                stop.set()
                watcher.join(10)
        statuses = [s for s, _, _ in answers]
        assert len(answers) == total
        assert set(statuses) <= {200, 429, 503, 504}, sorted(set(statuses))
        assert statuses.count(429) > 0 and statuses.count(200) > 0
        for status, headers, body in answers:
            if status == 200:
                result = orjson.loads(body)
                assert result["score"] == 1.0 and result["request_id"].startswith("flood-")
                continue
            err = ErrorResponse.model_validate(orjson.loads(body)).error
            assert err.retryable is True
            if status in (429, 503):
                assert int(headers["Retry-After"]) >= 1
        assert depths and max(depths) <= max_queue, max(depths)
        bound = rss_bound_bytes(rss.baseline, max_queue + concurrency, len(bodies[0]))
        assert rss.peak <= bound, f"RSS peak {rss.peak / 2**20:.0f} MiB over bound {bound / 2**20:.0f} MiB"
        # Overload costs time, not items: the client honours Retry-After and every item gets scored.
        items = list(range(1000, 1040))

        async def retrying() -> list[Any]:
            async with AsyncScorerClient(h.url, max_retries=20, backoff=0.1, timeout=30, deadline=120) as client:
                async def one(i: int) -> Any:
                    try:
                        return await client.score(clip(i), RATE, prompt_of(i), request_id=f"retry-{i}")
                    except ScorerError as exc:
                        return exc
                return list(await asyncio.gather(*map(one, items)))

        assert not _check_results(asyncio.run(retrying()), items, "retry")


def test_slow_engine_times_out_clients_and_drops_abandoned_work() -> None:
    # Early refusal off: this is the path of requests admitted anyway (the estimate errs, or is turned off).
    with running_server(instant=True, delay_ms=500, max_batch_size=1, max_wait_ms=0, request_timeout_s=1,
                        early_refusal=False) as h:
        async def client_timeout() -> BaseException:
            async with AsyncScorerClient(h.url, max_retries=0, timeout=0.2) as client:
                try:
                    await client.score(clip(1), RATE, prompt_of(1))
                except ScorerError as exc:
                    return exc
            raise AssertionError("a 0.2 s timeout against a 0.5 s engine must fail")

        exc = asyncio.run(client_timeout())
        assert isinstance(exc, ScorerUnavailableError) and isinstance(exc.last_cause, asyncio.TimeoutError)

        calls_before = read_metrics(h.url).get("audio_reward_batch_size_count{}", 0)
        t0 = time.monotonic()
        answers = asyncio.run(_raw_flood(h.url, [_body(i, 0.1) for i in range(20)], 20))
        elapsed = time.monotonic() - t0
        statuses = sorted(s for s, _, _ in answers)
        assert set(statuses) <= {200, 504} and statuses.count(504) >= 10, statuses
        for status, _, body in answers:
            if status == 504:
                err = ErrorResponse.model_validate(orjson.loads(body)).error
                assert err.code == "timeout" and err.retryable
        time.sleep(1.0)  # let the engine finish the call it is in
        calls = read_metrics(h.url)["audio_reward_batch_size_count{}"] - calls_before
        # Timed-out requests leave the queue untranscribed: engine calls follow wall time, not requests.
        assert calls <= (elapsed + 1.0) / 0.5 + 2, (calls, elapsed)
        assert calls < 20
