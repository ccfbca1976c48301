
"""Requests that tried to stall, bloat or crash the server, each against a real server process.

Every test starts ``audio-reward serve`` (the instant engine of ``tests/testkit/instant_engine.py``;
the HTTP layer, decoding, batching and scoring are the real ones) on loopback
and sends the hostile request byte for byte.  Memory is the server process's
RSS, sampled with psutil every 20 ms; each bound is stated where it is checked.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import psutil
import pytest
import soundfile as sf

from audio_reward.protocol import ErrorResponse, encode_f32
from tests.testkit.instant_engine import SAMPLE_RATE, clip
from tests.testkit.probes import RssSampler, read_metrics
from tests.testkit.server import ServerHandle, running_server

MIB = 2**20


def _request(prompt: str = "item 1", seconds: float = 0.5, **fields: Any) -> dict[str, Any]:
    audio = clip(1, seconds)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": len(audio),
            "sample_rate": SAMPLE_RATE, "prompt": prompt, **fields}


def _post(url: str, path: str, body: bytes, timeout: float = 120.0,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _error(raw: bytes) -> Any:
    return ErrorResponse.model_validate(orjson.loads(raw)).error


def _addr(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


class HealthProbe:
    """Asks ``/healthz`` over one keep-alive connection every ``interval_s`` in a thread; keeps each latency."""

    def __init__(self, url: str, interval_s: float = 0.02) -> None:
        self.url = url
        self.interval_s = interval_s
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        host, port = _addr(self.url)
        conn = http.client.HTTPConnection(host, port, timeout=10)
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                conn.request("GET", "/healthz")
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    self.failures.append(f"status {resp.status}")
            except (OSError, http.client.HTTPException) as exc:
                self.failures.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=10)
            self.latencies.append(time.perf_counter() - t0)
            self._stop.wait(self.interval_s)
        conn.close()

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    @property
    def worst_ms(self) -> float:
        return max(self.latencies) * 1000


@contextmanager
def _server(**settings: Any) -> Iterator[ServerHandle]:
    settings.setdefault("max_wait_ms", 2)
    with running_server(instant=True, **settings) as handle:
        yield handle


def _rss(handle: ServerHandle) -> int:
    return int(psutil.Process(handle.pid).memory_info().rss)


# -------------------------------------------------------------------- scoring never blocks the event loop

def test_huge_prompt_is_refused_at_once_naming_the_limit() -> None:
    with _server() as server, HealthProbe(server.url) as probe:
        t0 = time.perf_counter()
        status, _, raw = _post(server.url, "/v1/score", orjson.dumps(_request("hello world " * 700_000)))
        elapsed = time.perf_counter() - t0
    assert status == 400 and _error(raw).code == "prompt_too_long"
    assert "max_prompt_chars" in _error(raw).message and "10000" in _error(raw).message
    assert elapsed < 2.0  # an 8 MB prompt was scored for 5.1 s before the limit
    assert not probe.failures and probe.worst_ms < 500  # /healthz stalled for 4.6 s meanwhile


def test_healthz_answers_within_100ms_while_the_largest_allowed_requests_are_scored() -> None:
    # The slowest normalizer, prompts at the limit, a full batch of them: about 1.4 s of scoring work
    # that ran on the event loop before, stalling every other request meanwhile.
    items = 64
    with _server(normalizer="whisper-en", max_batch_items=items) as server:
        prompt = ("the quick brown fox jumps over the lazy dog, doesn't it? " * 200)[:10_000]
        batch = {"protocol_version": "1", "items": [_request(prompt, 1.0) for _ in range(items)]}
        body = orjson.dumps(batch)
        _post(server.url, "/v1/score/batch", body)  # warm: imports and first-call costs are not the point
        with HealthProbe(server.url) as probe:
            status, _, raw = _post(server.url, "/v1/score/batch", body)
            status2, _, _ = _post(server.url, "/v1/score", orjson.dumps(_request(prompt, 60.0)))
    results = orjson.loads(raw)["results"]
    assert status == 200 == status2 and len(results) == items and all("score" in r for r in results)
    assert len(probe.latencies) >= 10 and not probe.failures
    assert probe.worst_ms < 100, f"/healthz took {probe.worst_ms:.0f} ms while the batch was scored"


def test_metadata_limits_are_400s_naming_the_limit() -> None:
    with _server(max_metadata_keys=4, max_metadata_key_chars=8, max_metadata_value_chars=16) as server:
        cases = {
            "max_metadata_keys": {f"k{i}": i for i in range(5)},
            "max_metadata_key_chars": {"k" * 9: 1},
            "max_metadata_value_chars": {"k": "v" * 17},
        }
        for limit, metadata in cases.items():
            status, _, raw = _post(server.url, "/v1/score", orjson.dumps(_request(metadata=metadata)))
            assert status == 400 and _error(raw).code == "metadata_too_large" and limit in _error(raw).message
        status, _, raw = _post(server.url, "/v1/score", orjson.dumps(_request(metadata={"k": "v" * 16})))
        assert status == 200, raw


# -------------------------------------------------------------------- the retry cache keeps no prompt-sized copies

def test_retry_cache_keeps_transcripts_not_prompt_sized_answers() -> None:
    warm, kept, prompt_chars = 8, 20, 1_000_000
    # glibc's dynamic mmap threshold would keep freed megabyte buffers in the heap and hide what is
    # live: a fixed threshold returns them, so RSS follows what the server holds.
    malloc = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_ARENA_MAX": "2"}
    with _server(env=malloc, max_prompt_chars=prompt_chars, request_timeout_s=300) as server:
        def send(i: int) -> dict[str, Any]:
            body = orjson.dumps(_request(("hello world " * 90_000)[:prompt_chars], request_id=f"big-{i}"))
            status, _, raw = _post(server.url, "/v1/score", body)
            assert status == 200, raw
            return orjson.loads(raw)

        first = send(0)
        assert len(first["normalized_reference"]) > 900_000  # the answer does carry the prompt
        for i in range(1, warm):  # the allocator settles on its working set for such requests
            send(i)
        before = _rss(server)
        for i in range(warm, warm + kept):
            send(i)
        after = _rss(server)
        again = send(warm + kept - 1)
        assert again == send(warm + kept - 1) and len(again["normalized_reference"]) > 900_000
        metrics = read_metrics(server.url)
    assert metrics['audio_reward_items_total{outcome="deduplicated"}'] == 2  # the retries were answered from the cache
    # Keeping the answers would hold another 1 MB of normalized_reference per request (>= 20 MiB here);
    # the cache keeps each transcript only.
    assert after - before < 10 * MIB, f"RSS grew {(after - before) / MIB:.0f} MiB over {kept} more answers kept"


# -------------------------------------------------------------------- decoded audio is bounded before decoding

def _flac(seconds: float, rate: int, *, unknown_length: bool = False, tone_hz: float = 0.0) -> str:
    buf = io.BytesIO()
    block = rate * 10
    with sf.SoundFile(buf, "w", samplerate=rate, channels=1, format="FLAC", subtype="PCM_16") as f:
        left = int(seconds * rate)
        t = np.arange(block) / rate
        chunk = (0.1 * np.sin(2 * np.pi * tone_hz * t)).astype(np.float32) if tone_hz else np.zeros(block, np.float32)
        while left > 0:
            f.write(chunk[: min(block, left)])
            left -= block
    raw = bytearray(buf.getvalue())
    if unknown_length:  # STREAMINFO total_samples = 0: what streaming encoders write
        assert raw[:4] == b"fLaC"
        raw[8 + 13] &= 0xF0
        raw[8 + 14 : 8 + 18] = b"\0\0\0\0"
    return base64.b64encode(bytes(raw)).decode()


def _file_item(text: str) -> dict[str, Any]:
    return {"audio_file_base64": text, "prompt": "silence"}


def test_flac_batch_over_the_decoded_budget_is_refused_before_decoding() -> None:
    item = _file_item(_flac(59, 192_000))  # 45 MB once decoded, about 45 KB as FLAC
    body = orjson.dumps({"protocol_version": "1", "items": [item] * 8})
    assert len(body) < 1 * MIB
    with _server() as server:
        idle = _rss(server)
        with RssSampler(server.pid) as rss:
            status, _, raw = _post(server.url, "/v1/score/batch", body)
        assert status == 400 and _error(raw).code == "batch_too_large"
        assert "max_batch_audio_bytes" in _error(raw).message
        # Before, the 8 files were decoded first: +357 MB.  Now only the headers are read.
        assert rss.peak - idle < 48 * MIB, f"peak RSS grew {(rss.peak - idle) / MIB:.0f} MiB"
        with RssSampler(server.pid) as rss:
            status, _, raw = _post(server.url, "/v1/score/batch",
                                   orjson.dumps({"protocol_version": "1", "items": [item] * 2}))
        assert status == 200 and all("score" in r for r in orjson.loads(raw)["results"]), raw[:300]
        # Two files within the budget: their 2 x 45 MB of samples, plus a fixed allowance.
        assert rss.peak - idle < 2 * 46 * MIB + 96 * MIB


def test_flac_of_unknown_length_is_decoded_as_a_stream_and_stops_at_the_limit() -> None:
    with _server() as server:
        short = _file_item(_flac(5, 24_000, unknown_length=True, tone_hz=220))
        status, _, raw = _post(server.url, "/v1/score", orjson.dumps({"protocol_version": "1", **short}))
        assert status == 200, raw  # was refused: "holds 384307168202282.3 s of audio"
        assert abs(orjson.loads(raw)["duration_s"] - 5.0) < 1e-3
        idle = _rss(server)
        with RssSampler(server.pid) as rss:
            long = _file_item(_flac(600, 48_000, unknown_length=True))
            status, _, raw = _post(server.url, "/v1/score", orjson.dumps({"protocol_version": "1", **long}))
        assert status == 400 and _error(raw).code == "audio_too_long", raw
        assert "no declared length" in _error(raw).message
        # Decoding stopped at 60 s (11.5 MB of float32) instead of 10 minutes (115 MB).
        assert rss.peak - idle < 48 * MIB, f"peak RSS grew {(rss.peak - idle) / MIB:.0f} MiB"


# -------------------------------------------------------------------- the HTTP layer

def test_huge_header_gets_431_and_healthz_keeps_answering() -> None:
    with _server(max_header_bytes=64 * 1024) as server, HealthProbe(server.url) as probe, \
            socket.create_connection(_addr(server.url), timeout=10) as sock:
        def send() -> None:
            # The 64 MB header that got a 200 after 4.8 s, stalling /healthz; the server may answer and
            # close while we are still sending.
            with contextlib.suppress(OSError):
                sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * (64 * MIB))

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        answer = _read_all(sock)
        sender.join(10)
        refused = read_metrics(server.url).get('audio_reward_requests_total{endpoint="unmatched",status="431"}')
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    error = _error(answer.split(b"\r\n\r\n", 1)[1])
    assert error.code == "headers_too_large" and "max_header_bytes" in error.message
    assert not probe.failures and probe.worst_ms < 500  # /healthz stalled for seconds meanwhile
    assert refused == 1


def _read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return out


def test_slow_body_gets_408_and_its_connection_is_closed() -> None:
    with _server(body_timeout_s=1.0) as server, socket.create_connection(_addr(server.url), timeout=10) as sock:
        t0 = time.perf_counter()
        sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 4096\r\n\r\n" + b'{"protocol_version": "1", ')  # 26 of 4096 bytes
        answer = _read_all(sock)  # returns once the server closes the connection
        elapsed = time.perf_counter() - t0
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"connection: close" in answer.lower()
    assert _error(answer.split(b"\r\n\r\n", 1)[1]).code == "body_timeout"
    assert 0.9 < elapsed < 5.0


def test_slowloris_connections_are_closed_by_the_server() -> None:
    n = 200
    with _server(header_timeout_s=1.5, keep_alive_timeout_s=1.0) as server:
        socks = [socket.create_connection(_addr(server.url), timeout=10) for _ in range(n)]
        idle = socket.create_connection(_addr(server.url), timeout=10)  # connects and never speaks
        try:
            for s in socks:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\n")
            deadline = time.monotonic() + 6.0
            closed: set[int] = set()
            while time.monotonic() < deadline and len(closed) < n:
                for i, s in enumerate(socks):  # a byte every 0.25 s: what kept them open before
                    if i in closed:
                        continue
                    try:
                        s.sendall(b"X")
                    except OSError:
                        closed.add(i)
                time.sleep(0.25)
            answers = [_read_all(s, timeout=5) for s in socks]
            assert _read_all(idle, timeout=5) == b""  # closed without an answer: it asked nothing
            time.sleep(0.5)
            established = [c for c in psutil.Process(server.pid).net_connections()
                           if c.status == psutil.CONN_ESTABLISHED]
            assert not established, f"{len(established)} connections still open"
        finally:
            for s in [*socks, idle]:
                s.close()
        assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers), {a[:40] for a in answers}
        assert _error(answers[0].split(b"\r\n\r\n", 1)[1]).code == "header_timeout"
        # Each refusal is counted; the idle connection asked nothing, so it is not.
        assert read_metrics(server.url).get('audio_reward_requests_total{endpoint="unmatched",status="408"}') == n

        # A keep-alive connection left idle after its answer is closed too.
        host, port = _addr(server.url)
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        time.sleep(2.0)
        assert conn.sock is not None and _read_all(conn.sock, timeout=3) == b""
        conn.close()


def test_client_leaving_mid_body_is_counted_client_closed_and_logged_at_info() -> None:
    with _server(log_level="info") as server:
        for _ in range(3):
            with socket.create_connection(_addr(server.url), timeout=10) as sock:
                sock.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100000\r\n\r\n" + b" " * 1000)
                time.sleep(0.2)
        time.sleep(0.5)
        metrics = read_metrics(server.url)
        log = server.log_tail(100_000)
    closed = 'audio_reward_requests_total{endpoint="/v1/score",status="client_closed"}'
    assert metrics.get(closed) == 3, {k: v for k, v in metrics.items() if "requests_total" in k}
    assert not any("status=\"500\"" in k for k in metrics if "requests_total" in k)
    assert log.count("client closed the connection") == 3 and "INFO" in log
    assert "Traceback" not in log and "ClientDisconnect" not in log and "ERROR" not in log


@pytest.mark.parametrize("method, path", [("POST", "/score/"), ("POST", "/v1/score/"), ("POST", "/v1/score/batch/"),
                                          ("GET", "/v1/info/"), ("GET", "/healthz/")])
def test_trailing_slash_is_a_protocol_404_never_a_redirect(trailing_server: ServerHandle, method: str,
                                                           path: str) -> None:
    conn = http.client.HTTPConnection(*_addr(trailing_server.url), timeout=10)
    conn.request(method, path, body=b"{}" if method == "POST" else None,
                 headers={"Host": "attacker.example", "Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read()
    assert resp.status == 404 and resp.getheader("location") is None
    error = _error(raw)
    assert error.code == "not_found" and f"did you mean {path.rstrip('/')}?" in error.message


@pytest.fixture(scope="module")
def trailing_server() -> Iterator[ServerHandle]:
    with _server() as server:
        yield server


def test_max_connections_turns_new_requests_away_with_503() -> None:
    with _server(max_connections=3) as server:
        host, port = _addr(server.url)
        held = [http.client.HTTPConnection(host, port, timeout=10) for _ in range(2)]
        for conn in held:  # two keep-alive connections stay open
            conn.request("GET", "/healthz")
            conn.getresponse().read()
        status, _, _ = _post(server.url, "/v1/score", orjson.dumps(_request()))
        assert status == 503  # the third connection reaches the limit
        for conn in held:
            conn.close()
        time.sleep(0.3)
        status, _, raw = _post(server.url, "/v1/score", orjson.dumps(_request()))
        assert status == 200, raw
