"""Where one request's milliseconds go in the server, at concurrency 1: a timing breakdown.

    python -m bench.latency_profile [--engine lock|batch-cost|faster-whisper] [--requests 200] [--route score|openai]

Starts the real server (``audio-reward serve``, with the synthetic engines of ``bench/scheduling.py``
registered, or the faster-whisper engine on tiny.en) in its own process with timestamps hooked into the path
of a request: uvicorn's parser callbacks, the ASGI middleware, the body read, the pipeline's steps, the
engine client, the engine call, the scoring hop and the response.  The hooks wrap methods at start-up; no
code of the server changes.  One client sends ``--requests`` requests one after another (clips of 1-20 s
as ``bench/scheduling.py`` sends them; speech for faster-whisper) and stamps send and receipt.  All stamps
are ``time.perf_counter`` (CLOCK_MONOTONIC: one clock across the two processes).

Printed: for each step between two consecutive stamps, the median and p90 in milliseconds over the requests,
and the total the server adds (the client's latency minus the engine call).  With ``--cprofile FILE`` the
server also runs under cProfile (CPU time per function; slower, so its timings are not the breakdown's).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT_ENV = "AUDIO_REWARD_LATENCY_PROFILE_OUT"

# --------------------------------------------------------------------------- server side
_stamps: list[tuple[str, float]] = []
_lock = threading.Lock()


def stamp(name: str) -> None:
    with _lock:
        _stamps.append((name, time.perf_counter()))


def _flush(path: str) -> None:
    global _stamps
    with _lock:
        events, _stamps = _stamps, []
    with open(path, "a") as out:
        out.write(json.dumps(events) + "\n")


def _wrap_sync(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{label}>")
        try:
            return original(*args, **kwargs)
        finally:
            stamp(f"{label}<")

    setattr(owner, name, wrapper)


def _wrap_async(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{label}>")
        try:
            return await original(*args, **kwargs)
        finally:
            stamp(f"{label}<")

    setattr(owner, name, wrapper)


def install_hooks(out: str) -> None:
    """Timestamps on the request path; each request's stamps go to ``out`` when its response has been sent."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    from audio_reward.scorer_server.engines import base
    from audio_reward.scorer_server.http import middleware, responses, score
    from audio_reward.scorer_server.http import openai as openai_routes
    from audio_reward.scorer_server.service import engine_client, offload, pipeline, scheduler, transcription

    for meth, label in (("on_message_begin", "uvicorn.message_begin"), ("on_headers_complete", "uvicorn.headers"),
                        ("on_message_complete", "uvicorn.message_complete")):
        original = getattr(HttpToolsProtocol, meth)

        def make(original: Callable[..., Any], label: str) -> Callable[..., Any]:
            def hook(self: Any, *args: Any) -> Any:
                stamp(label)
                return original(self, *args)
            return hook

        setattr(HttpToolsProtocol, meth, make(original, label))

    _wrap_async(RequestResponseCycle, "send", "uvicorn.send")  # the response head and body, one stamp pair each
    call = middleware.RequestContextMiddleware.__call__

    async def asgi(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in ("/readyz", "/healthz", "/metrics", "/v1/info"):
            await call(self, scope, receive, send)
            return
        stamp("middleware>")

        async def timed_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                stamp("send.response_start")
            await send(message)
            if message["type"] == "http.response.start":
                stamp("send.response_start_done")
            if message["type"] == "http.response.body" and not message.get("more_body"):
                stamp("send.body_done")

        await call(self, scope, receive, timed_send)
        stamp("middleware<")
        _flush(out)

    middleware.RequestContextMiddleware.__call__ = asgi  # type: ignore[method-assign]

    body_read = score.read_body

    async def read_body(*args: Any, **kwargs: Any) -> Any:
        stamp("read_body>")
        try:
            return await body_read(*args, **kwargs)
        finally:
            stamp("read_body<")

    score.read_body = read_body  # type: ignore[assignment]
    if hasattr(openai_routes, "read_body"):
        openai_routes.read_body = read_body  # type: ignore[attr-defined]
    _wrap_async(pipeline.ScoringPipeline, "score", "pipeline.score")
    _wrap_sync(pipeline.ScoringPipeline, "_prepare_one", "pipeline._prepare_one (thread)")
    _wrap_sync(pipeline, "decode_score_request", "decode_score_request")
    _wrap_sync(pipeline, "parse_json", "parse_json")
    _wrap_sync(pipeline, "resample_16k", "resample_16k")
    _wrap_sync(pipeline.ScoringPipeline, "_prepare", "pipeline._prepare (prompt normalized)")
    _wrap_async(pipeline.ScoringPipeline, "_score_items", "pipeline._score_items")
    _wrap_sync(pipeline.ScoringPipeline, "_score", "pipeline._score (thread)")
    _wrap_async(offload.Offload, "run", "offload.run")
    _wrap_async(transcription.TranscriptionService, "transcribe", "transcription.transcribe")
    _wrap_sync(transcription, "decode_upload", "decode_upload (thread)")
    _wrap_async(engine_client.EngineClient, "transcribe_many", "engine_client.transcribe_many")
    _wrap_sync(engine_client, "admit", "scheduler.admit")
    _wrap_sync(responses.OrjsonResponse, "render", "OrjsonResponse.render")
    for cls in (base.ThreadedEngine,):
        _wrap_async(cls, "transcribe", "engine.transcribe (async)")
    del scheduler  # the engine's own calls are stamped on the engine classes (below)


def hook_engine_classes() -> None:
    """The engine's blocking calls: the model's time, which the server does not add."""
    import bench.scheduling as sched
    from audio_reward.scorer_server.engines.faster_whisper_engine import FasterWhisperEngine

    for cls in (sched.BatchCostEngine, sched.LockEngine):
        _wrap_sync(cls, "transcribe_batch_sync", "ENGINE")
    _wrap_sync(FasterWhisperEngine, "prepare_sync", "ENGINE.features")
    _wrap_sync(FasterWhisperEngine, "transcribe_prepared_sync", "ENGINE")


def serve_main(argv: list[str]) -> int:
    out = os.environ[OUT_ENV]
    install_hooks(out)
    hook_engine_classes()
    import bench.scheduling as sched

    return sched.serve_main(argv)


# --------------------------------------------------------------------------- client side
def request_bodies(engine: str, route: str, n: int) -> list[tuple[dict[str, Any], float]]:
    """(httpx request kwargs, audio seconds) for ``n`` requests."""
    import numpy as np

    from audio_reward.protocol import encode_f32
    from bench.cpu_peers import make_clips
    from bench.scheduling import Clips
    from tests.testkit.instant_engine import prompt_of

    out: list[tuple[dict[str, Any], float]] = []
    if engine == "faster-whisper":
        clips = make_clips()
        for i in range(n):
            c = clips[i % len(clips)]
            if route == "score":
                out.append(({"content": c.score_body}, c.seconds))
            else:
                out.append(({"files": {"file": ("a.wav", c.wav, "audio/wav")}, "data": {"model": "tiny.en"}},
                            c.seconds))
        return out
    clips_ = Clips(seed=1)
    for _ in range(n):
        body, seconds = clips_.body()
        if route == "score":
            out.append(({"content": body}, seconds))
        else:
            from bench.cpu_peers import wav_bytes

            payload = json.loads(body)
            import base64

            audio = np.frombuffer(base64.b64decode(payload["waveform_f32_base64"]), dtype="<f4")
            out.append(({"files": {"file": ("a.wav", wav_bytes(audio, payload["sample_rate"]), "audio/wav")},
                         "data": {"model": "synthetic"}}, seconds))
    del encode_f32, prompt_of
    return out


async def drive(url: str, route: str, requests: list[tuple[dict[str, Any], float]]) -> list[tuple[float, float]]:
    import httpx

    path = "/v1/score" if route == "score" else "/v1/audio/transcriptions"
    times = []
    async with httpx.AsyncClient(timeout=120) as client:
        for kwargs, _ in requests:
            if route == "score":
                kwargs = {**kwargs, "headers": {"Content-Type": "application/json"}}
            t0 = time.perf_counter()
            r = await client.post(f"{url}{path}", **kwargs)
            t1 = time.perf_counter()
            if r.status_code != 200:
                raise SystemExit(f"{r.status_code}: {r.text[:300]}")
            times.append((t0, t1))
    return times


def analyse(records: list[list[tuple[str, float]]], times: list[tuple[float, float]], skip: int) -> None:
    steps: dict[str, list[float]] = {}
    order: list[str] = []
    added, engine = [], []
    for events, (t0, t1) in list(zip(records, times, strict=True))[skip:]:
        seq = [("client.send", t0), *events, ("client.received", t1)]
        seq.sort(key=lambda e: e[1])
        eng = sum(b[1] - a[1] for a, b in itertools.pairwise(seq) if a[0] == "ENGINE>" and b[0] == "ENGINE<")
        feats = sum(b[1] - a[1] for a, b in itertools.pairwise(seq)
                    if a[0] == "ENGINE.features>" and b[0] == "ENGINE.features<")
        engine.append((eng + feats) * 1000)
        added.append((t1 - t0 - eng - feats) * 1000)
        for a, b in itertools.pairwise(seq):
            key = f"{a[0]} -> {b[0]}"
            if key not in steps:
                order.append(key)
            steps.setdefault(key, []).append((b[1] - a[1]) * 1000)
    n = len(added)
    print(f"{n} requests (after {skip} warm-up); steps present in at least half of them, in time order")
    print("| step (from stamp -> to stamp) | median ms | p90 ms | seen |")
    print("|---|---|---|---|")
    for key in order:
        values = steps[key]
        if len(values) < n / 2:
            continue
        values.sort()
        print(f"| {key} | {statistics.median(values):.3f} | {values[int(0.9 * (len(values) - 1))]:.3f} "
              f"| {len(values)} |")
    added.sort()
    print(f"\nengine call (model time) median {statistics.median(engine):.2f} ms; server added (client latency "
          f"minus engine call): median {statistics.median(added):.2f} ms, p90 {added[int(0.9 * (n - 1))]:.2f} ms")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        return serve_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="lock", choices=["lock", "batch-cost", "faster-whisper"])
    ap.add_argument("--route", default="score", choices=["score", "openai"])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cprofile", type=Path, default=None, help="also run the server under cProfile, to FILE")
    ap.add_argument("--server-flag", action="append", default=[], help="extra flags for the server")
    args = ap.parse_args()

    from bench.scheduling import engine_option_flags, server_settings
    from tests.testkit.server import free_port, settings_to_flags, stop_process, wait_ready

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="latency-profile-") as tmp:
        out = Path(tmp) / "stamps.jsonl"
        if args.engine == "faster-whisper":
            flags = ["--model", "tiny.en", "--cpu-threads", "2", "--language", "en", "--served-model-name",
                     "tiny.en", "--port", str(port), "--host", "127.0.0.1"]
        else:
            settings = {**server_settings(args.engine), "host": "127.0.0.1", "port": port,
                        "served_model_name": ["synthetic"]}
            flags = ["--engine", f"bench-{args.engine}", *settings_to_flags(settings),
                     *engine_option_flags(args.engine)]
        prefix = [sys.executable]
        if args.cprofile:
            prefix += ["-m", "cProfile", "-o", str(args.cprofile)]
        cmd = [*prefix, "-m", "bench.latency_profile", "serve", *flags, *args.server_flag]
        if args.cprofile:
            cmd = [*prefix, str(REPO / "bench/latency_profile.py"), "serve", *flags, *args.server_flag]
        log = Path(tmp) / "server.log"
        with open(log, "wb") as logf:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=logf, stderr=subprocess.STDOUT,
                                    env={**os.environ, OUT_ENV: str(out), "PYTHONPATH": str(REPO)})
        try:
            wait_ready(url, 180, proc=proc, log_path=log)
            out.write_text("")  # readiness probes and warm-up are not requests
            requests = request_bodies(args.engine, args.route, args.requests)
            times = asyncio.run(drive(url, args.route, requests))
            time.sleep(0.5)
        finally:
            stop_process(proc, grace_s=30)
        records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    print(f"engine {args.engine}, route {args.route}; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if len(records) != len(times):
        print(f"warning: {len(records)} stamp records for {len(times)} requests")
        records = records[-len(times):]
    analyse(records, times, args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
