"""A Ray Serve replica killed under load: what the client loses, how long Ray takes to replace it.

    python -m bench.ray_replica_kill [--rate 20] [--min-requests 240] [--delay-ms 150] [--json FILE]

Starts ``audio-reward serve --ray`` with two local CPU replicas of the instant
engine (``tests.testkit.instant_engine``; each engine call sleeps ``--delay-ms``,
so requests are in flight on both replicas when one dies) and sends a steady load:
``--rate`` requests a second through the project's :class:`AsyncScorerClient`
with its retries.  Once a quarter of ``--min-requests`` are answered, one
replica's worker process (found in the process list by Ray's title,
``ray::ServeReplica:audio-reward:scorer``, among the server's descendants)
gets SIGKILL.  The load goes on until at least ``--min-requests`` were sent
and the replacement replica has answered for ``--after-s`` seconds.

Every HTTP exchange is recorded under the client (a wrapping transport): its
request id, status and the replica that answered (``X-Scorer-Replica``), so the
report says how many attempts each request took, which statuses the dead
replica's requests got, and whether any request id got two scores.  A prober
asks ``/healthz`` through the proxy every 50 ms and notes when a replica id
never seen before answers: the replacement is serving.  Prints one JSON line.

The server side is ``python -m bench.ray_replica_kill serve [serve flags...]``:
``audio-reward serve --ray --engine instant`` with the instant engine (its
``--engine-option delay_ms=MS`` travels with the settings to every replica).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import httpx
import orjson

from audio_reward.scorer_client import AsyncScorerClient, ScorerError, ScoreResult
from audio_reward.scorer_client.transport import AiohttpTransport, AsyncTransport, Request, Response
from audio_reward.scorer_server.engines.base import EngineOption, resolve_engine_options
from tests.testkit.instant_engine import SAMPLE_RATE, InstantEngine, clip, prompt_of
from tests.testkit.server import free_port, settings_to_flags, stop_process, wait_ready

REPO = Path(__file__).resolve().parents[1]
REPLICA_TITLE = "ServeReplica:audio-reward:scorer"
"""What Ray's worker process title holds for a replica of the scorer deployment."""


class DelayedInstantEngine(InstantEngine):
    """The instant engine with its delay as an engine option, so it reaches Ray replicas with the settings."""

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = MappingProxyType({
        "delay_ms": EngineOption(float, 0.0, "milliseconds each engine call sleeps"),
    })

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        given = config.options if config is not None else {}
        self.delay_s = resolve_engine_options("instant", self.OPTIONS, given)["delay_ms"] / 1000.0


def serve(argv: Sequence[str]) -> int:
    """``audio-reward serve --ray --engine instant`` with :class:`DelayedInstantEngine` registered."""
    from audio_reward.cli import main as cli_main
    from audio_reward.scorer_server.engines import registry

    registry.ENGINES["instant"] = "bench.ray_replica_kill:DelayedInstantEngine"
    return cli_main(["serve", "--ray", "--engine", "instant", *argv])


# --------------------------------------------------------------------------- the client side's record


@dataclass
class Exchange:
    """One HTTP exchange the client made."""

    request_id: str | None
    sent: float
    done: float
    status: int | None  # None: the transport failed (connection refused or broken, timeout)
    replica: str | None
    error: str | None = None


class RecordingTransport(AsyncTransport):
    """The client's default transport, with every exchange recorded."""

    def __init__(self) -> None:
        self.inner = AiohttpTransport()
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: Request) -> Response:
        request_id = _request_id(request.body)
        sent = time.monotonic()
        try:
            response = await self.inner.handle_async_request(request)
        except Exception as exc:
            self.exchanges.append(Exchange(request_id, sent, time.monotonic(), None, None, repr(exc)))
            raise
        error = None if response.status == 200 else response.body[:200].decode(errors="replace")
        self.exchanges.append(Exchange(request_id, sent, time.monotonic(), response.status,
                                       response.header("X-Scorer-Replica"), error))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _request_id(body: bytes | None) -> str | None:
    if not body:
        return None
    rid = orjson.loads(body).get("request_id")
    return rid if isinstance(rid, str) else None


# --------------------------------------------------------------------------- the replicas, from outside


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state; the name may hold spaces


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        pid = _parent(pid)
    return False


def replica_pids(server_pid: int) -> list[int]:
    """The PIDs of the scorer replica processes under ``server_pid`` (its Ray), by the title Ray gives them.

    Ray's processes started by the server are its descendants, so other deployments on the machine are left alone.
    """
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if REPLICA_TITLE.encode() in cmdline and _descends_from(int(entry.name), server_pid):
            pids.append(int(entry.name))
    return sorted(pids)


@dataclass
class Prober:
    """Asks ``/healthz`` through the proxy every 50 ms; notes when each replica id first answers."""

    url: str
    first_seen: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.stop.is_set():
                try:
                    replica = http.get(f"{self.url}/healthz").headers.get("X-Scorer-Replica")
                except httpx.HTTPError:
                    replica = None
                if replica and replica not in self.first_seen:
                    self.first_seen[replica] = time.monotonic()
                self.stop.wait(0.05)


# --------------------------------------------------------------------------- the run


@dataclass
class KillReport:
    """What one run measured; times in seconds from the first request."""

    requests: int
    scored: int
    failed: int
    scored_twice: int
    wrong_answers: int
    retried: int
    attempts_max: int
    failed_attempt_statuses: dict[str, int]
    failed_attempt_example: str | None
    killed_pid: int
    killed_at_s: float
    replica_process_back_s: float | None
    replacement_serving_s: float | None
    throughput_before: float
    throughput_during: float
    throughput_after: float
    latency_p50_s: float
    latency_max_s: float
    duration_s: float
    rate: float

    def problems(self) -> list[str]:
        """Every way the run differs from 'each request answered once with its own score'."""
        out = []
        if self.scored != self.requests or self.failed:
            out.append(f"{self.requests - self.scored} of {self.requests} requests not scored ({self.failed} failed)")
        if self.scored_twice:
            out.append(f"{self.scored_twice} request ids got more than one score")
        if self.wrong_answers:
            out.append(f"{self.wrong_answers} answers carried another request's transcript or id")
        return out


@dataclass
class _Load:
    results: dict[int, ScoreResult | ScorerError] = field(default_factory=dict)
    started: dict[int, float] = field(default_factory=dict)
    finished: dict[int, float] = field(default_factory=dict)
    sent: int = 0


async def _steady_load(url: str, transport: RecordingTransport, load: _Load, rate: float,
                       keep_going: threading.Event) -> None:
    """``rate`` requests a second, each scored with the client's retries, until ``keep_going`` is cleared."""
    async with AsyncScorerClient(url, transport=transport, max_retries=20, backoff=0.05, backoff_max=1.0,
                                 timeout=15, deadline=120) as client:
        async def one(i: int) -> None:
            load.started[i] = time.monotonic()
            try:
                load.results[i] = await client.score(clip(i), SAMPLE_RATE, prompt_of(i), request_id=f"ray-{i}")
            except ScorerError as exc:
                load.results[i] = exc
            load.finished[i] = time.monotonic()

        tasks = []
        start = time.monotonic()
        while keep_going.is_set():
            tasks.append(asyncio.create_task(one(load.sent)))
            load.sent += 1
            await asyncio.sleep(max(0.0, start + load.sent / rate - time.monotonic()))
        await asyncio.gather(*tasks)


def _rate(times: list[float], lo: float, hi: float | None) -> float:
    if hi is None or hi <= lo:
        return 0.0
    return sum(lo <= t < hi for t in times) / (hi - lo)


def measure(url: str, server_pid: int, *, rate: float = 20.0, min_requests: int = 240, after_s: float = 5.0,
            max_s: float = 150.0) -> KillReport:
    """Run the load against the two-replica deployment at ``url`` (started by ``server_pid``), kill one, report."""
    transport, load, keep_going = RecordingTransport(), _Load(), threading.Event()
    prober = Prober(url)
    threading.Thread(target=prober.run, name="replica-prober", daemon=True).start()
    time.sleep(1.0)
    before = dict(prober.first_seen)
    keep_going.set()
    t0 = time.monotonic()
    client = threading.Thread(target=lambda: asyncio.run(_steady_load(url, transport, load, rate, keep_going)),
                              name="steady-load")
    client.start()
    try:
        while len(load.finished) < min_requests // 4 and time.monotonic() - t0 < max_s:
            time.sleep(0.01)
        pids = replica_pids(server_pid)
        if len(pids) != 2:
            raise RuntimeError(f"expected two scorer replica processes, found {pids}")
        victim = pids[0]
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        process_back = serving = None
        while time.monotonic() - t0 < max_s:
            if process_back is None and len([p for p in replica_pids(server_pid) if p != victim]) == 2:
                process_back = time.monotonic()
            new = [t for r, t in prober.first_seen.items() if r not in before and t > killed]
            serving = min(new) if new else None
            if serving is not None and load.sent >= min_requests and time.monotonic() > serving + after_s:
                break
            time.sleep(0.05)
    finally:
        keep_going.clear()
        client.join(max_s)
        prober.stop.set()
    end = time.monotonic()
    return _report(load, transport.exchanges, rate=rate, t0=t0, killed=killed, victim=victim,
                   process_back=process_back, serving=serving, end=end)


def _report(load: _Load, exchanges: list[Exchange], *, rate: float, t0: float, killed: float, victim: int,
            process_back: float | None, serving: float | None, end: float) -> KillReport:
    oks = Counter(e.request_id for e in exchanges if e.status == 200)
    attempts = Counter(e.request_id for e in exchanges if e.request_id)
    statuses = Counter(str(e.status) if e.status is not None else (e.error or "?").split("(")[0]
                       for e in exchanges if e.status != 200)
    scored = [r for r in load.results.values() if isinstance(r, ScoreResult)]
    wrong = sum(1 for i, r in load.results.items() if isinstance(r, ScoreResult)
                and (r.request_id != f"ray-{i}" or r.score != 1.0 or r.diagnostics.get("transcript") != prompt_of(i)))
    done = list(load.finished.values())
    latencies = sorted(load.finished[i] - load.started[i] for i in load.finished)
    during_end = serving if serving is not None else end
    return KillReport(
        requests=load.sent, scored=len(scored), failed=load.sent - len(scored),
        scored_twice=sum(1 for n in oks.values() if n > 1), wrong_answers=wrong,
        retried=sum(1 for n in attempts.values() if n > 1), attempts_max=max(attempts.values(), default=0),
        failed_attempt_statuses=dict(statuses),
        failed_attempt_example=next((e.error for e in exchanges if e.status != 200), None),
        killed_pid=victim, killed_at_s=round(killed - t0, 2),
        replica_process_back_s=None if process_back is None else round(process_back - killed, 2),
        replacement_serving_s=None if serving is None else round(serving - killed, 2),
        throughput_before=round(_rate(done, t0 + 1.0, killed), 2),  # the first second is the client warming up
        throughput_during=round(_rate(done, killed, during_end), 2),
        throughput_after=round(_rate(done, during_end, end - 0.5), 2),  # the last half second: the load stopping
        latency_p50_s=round(latencies[len(latencies) // 2], 3) if latencies else 0.0,
        latency_max_s=round(latencies[-1], 3) if latencies else 0.0,
        duration_s=round(end - t0, 2), rate=rate)


def run(*, rate: float = 20.0, min_requests: int = 240, delay_ms: float = 150.0, after_s: float = 5.0,
        ready_timeout_s: float = 300.0, python: str | None = None) -> tuple[KillReport, str]:
    """Start the two-replica deployment, measure, stop it; the report and the server's log."""
    port = free_port()
    settings = {"host": "127.0.0.1", "port": port, "max_batch_size": 4, "max_wait_ms": 2,
                "engine_option": f"delay_ms={delay_ms:g}", "min_replicas": 2, "max_replicas": 2,
                "gpus_per_replica": 0, "cpus_per_replica": 0.5, "max_ongoing_requests": 16}
    interpreter = python or os.environ.get("AUDIO_REWARD_TEST_SERVER_PYTHON") or sys.executable
    cmd = [interpreter, "-m", "bench.ray_replica_kill", "serve", *settings_to_flags(settings)]
    env = {**os.environ, "RAY_ADDRESS": "",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="ray-kill-") as tmp:
        log_path = Path(tmp) / "server.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(url, ready_timeout_s, proc=proc, log_path=log_path)
            report = measure(url, proc.pid, rate=rate, min_requests=min_requests, after_s=after_s)
        finally:
            stop_process(proc, grace_s=60)
        return report, log_path.read_text(errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["serve"]:
        return serve(args_in[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.ray_replica_kill", description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="requests a second")
    parser.add_argument("--min-requests", type=int, default=240)
    parser.add_argument("--delay-ms", type=float, default=150.0, help="each engine call's sleep")
    parser.add_argument("--after-s", type=float, default=5.0, help="seconds of load after the replacement serves")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(args_in)
    report, _ = run(rate=args.rate, min_requests=args.min_requests, delay_ms=args.delay_ms, after_s=args.after_s)
    line = json.dumps(asdict(report), sort_keys=True)
    print(line)
    if args.json:
        args.json.write_text(line + "\n")
    return 1 if report.problems() else 0


if __name__ == "__main__":
    sys.exit(main())
