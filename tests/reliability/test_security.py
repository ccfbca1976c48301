"""Security: API keys, no file or URL access from a request, body limits before parsing.

Runs against the shared tiny.en server (``tiny_server``: API key set,
16 MiB body limit).
"""

from __future__ import annotations

import base64
import http.client
import inspect
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from audio_reward.protocol import ErrorResponse
from audio_reward.scorer_server.http import auth
from tests.testkit.server import ServerHandle

from .bad_inputs import valid_request
from .conftest import API_KEY, BODY_LIMIT

SCORING = [("POST", "/v1/score"), ("POST", "/score"), ("POST", "/v1/score/batch"), ("GET", "/v1/info")]
# Bodies that pass auth but fail validation: a 400 proves the key was accepted without running the model.
INCOMPLETE = {"/v1/score": {"protocol_version": "1"}, "/score": {"protocol_version": "1"},
              "/v1/score/batch": {"protocol_version": "1", "items": []}}


def _error(resp: httpx.Response) -> Any:
    return ErrorResponse.model_validate(resp.json()).error


def _call(url: str, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = orjson.dumps(INCOMPLETE[path]) if method == "POST" else None
    return httpx.request(method, url + path, content=body, headers={"Content-Type": "application/json", **headers},
                         timeout=30)


WRONG_KEYS = {
    "missing": {},
    "bearer without a key": {"Authorization": "Bearer"},
    "wrong bearer": {"Authorization": "Bearer not-the-key"},
    "key prefix": {"Authorization": f"Bearer {API_KEY[:-1]}"},
    "key plus a char": {"Authorization": f"Bearer {API_KEY}x"},
    "key upper-cased": {"Authorization": f"Bearer {API_KEY.upper()}"},
    "basic scheme": {"Authorization": "Basic " + base64.b64encode(f"user:{API_KEY}".encode()).decode()},
    "wrong X-API-Key": {"X-API-Key": "nope"},
    "key in the query only": {},
}


@pytest.mark.parametrize("method, path", SCORING)
@pytest.mark.parametrize("how", list(WRONG_KEYS))
def test_missing_or_wrong_key_is_401_on_every_scoring_endpoint(tiny_server: ServerHandle, method: str,
                                                                path: str, how: str) -> None:
    target = path + (f"?api_key={API_KEY}" if how == "key in the query only" else "")
    resp = _call(tiny_server.url, method, target if method == "GET" else path, WRONG_KEYS[how])
    assert resp.status_code == 401, resp.text
    err = _error(resp)
    assert err.code == "unauthorized" and err.retryable is False
    assert API_KEY not in resp.text
    assert resp.headers.get("www-authenticate", "").lower().startswith("bearer")


@pytest.mark.parametrize("method, path", SCORING)
@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_right_key_passes(tiny_server: ServerHandle, method: str, path: str, header: str) -> None:
    value = f"Bearer {API_KEY}" if header == "Authorization" else API_KEY
    resp = _call(tiny_server.url, method, path, {header: value})
    assert resp.status_code == (200 if method == "GET" else 400), resp.text


def test_right_key_scores(tiny_server: ServerHandle, auth_headers: dict[str, str]) -> None:
    resp = httpx.post(tiny_server.url + "/v1/score", json=valid_request(), headers=auth_headers, timeout=60)
    assert resp.status_code == 200 and 0.0 <= resp.json()["score"] <= 1.0


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_health_and_metrics_need_no_key(tiny_server: ServerHandle, path: str) -> None:
    resp = httpx.get(tiny_server.url + path, timeout=10)
    assert resp.status_code == 200
    assert API_KEY not in resp.text


def test_key_comparison_is_constant_time() -> None:
    source = inspect.getsource(auth)
    assert "hmac.compare_digest" in source
    check = inspect.getsource(auth.require_api_key)
    assert "==" not in check and "!=" not in check, "the key must not be compared with == (timing leak)"


# --------------------------------------------------------------------------- no local files, no URLs

class _Listener:
    """A loopback TCP listener that counts connections: a fetch by the server would show up here."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    lst = _Listener()
    yield lst
    lst.close()


def _file_and_url_payloads(port: int) -> list[tuple[str, dict[str, Any]]]:
    here = f"http://127.0.0.1:{port}/speech.wav"
    drop = {"waveform_f32_base64": None, "num_samples": None, "sample_rate": None}

    def file_field(value: str) -> dict[str, Any]:
        req = valid_request()
        for k in drop:
            req.pop(k)
        return {**req, "audio_file_base64": value}

    cases: list[tuple[str, dict[str, Any]]] = []
    for value in ("/etc/passwd", "file:///etc/passwd", here, "\\\\server\\share\\a.wav",
                  base64.b64encode(b"/etc/passwd").decode(), base64.b64encode(here.encode()).decode()):
        cases.append((f"audio_file_base64={value}", file_field(value)))
    for field_name in ("waveform_f32_base64", "waveform_pcm16_base64"):
        for value in ("/etc/passwd", "file:///etc/passwd", here):
            req = valid_request()
            req.pop("waveform_f32_base64")
            cases.append((f"{field_name}={value}", {**req, field_name: value}))
    for field_name in ("audio_path", "url", "audio_url", "file", "path", "waveform_path", "model", "model_path",
                       "callback_url", "webhook"):
        cases.append((f"unknown field {field_name}", valid_request(**{field_name: here})))
    return cases


def test_no_field_makes_the_server_read_a_file_or_fetch_a_url(tiny_server: ServerHandle,
                                                                auth_headers: dict[str, str],
                                                                listener: _Listener) -> None:
    failures = []
    for name, payload in _file_and_url_payloads(listener.port):
        item = {k: v for k, v in payload.items() if k != "protocol_version"}
        for path, body in (("/v1/score", payload),
                           ("/v1/score/batch", {"protocol_version": "1", "items": [item]})):
            resp = httpx.post(tiny_server.url + path, content=json.dumps(body), headers=auth_headers, timeout=60)
            if path == "/v1/score":
                if resp.status_code != 400 or _error(resp).retryable:
                    failures.append(f"{name}: {resp.status_code} {resp.text[:200]}")
            else:
                result = resp.json()["results"][0] if resp.status_code == 200 else None
                if result is None or "error" not in result:
                    failures.append(f"{name} in a batch: {resp.status_code} {resp.text[:200]}")
            if "root:" in resp.text:
                failures.append(f"{name}: the answer holds file contents")
    assert not failures, "\n".join(failures)
    # Text fields that look like paths or URLs are only text: scored, never opened.
    text_like = valid_request(
        prompt=f"file:///etc/passwd http://127.0.0.1:{listener.port}/x",
        metadata={"url": f"http://127.0.0.1:{listener.port}/", "path": "/etc/passwd"},
        request_id=f"http://127.0.0.1:{listener.port}/id",
    )
    resp = httpx.post(tiny_server.url + "/v1/score", json=text_like, headers=auth_headers, timeout=60)
    assert resp.status_code in (200, 400) and "root:" not in resp.text
    time.sleep(0.5)
    assert listener.connections == 0, "the server opened a connection to a URL found in a request"


# --------------------------------------------------------------------------- body limits before parsing


def _raw(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _read_response(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _content_length(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return int(v.strip())
    return 0


@pytest.mark.parametrize("with_key", [True, False])
def test_huge_content_length_is_refused_at_once(tiny_server: ServerHandle, with_key: bool) -> None:
    host, port = _raw(tiny_server.url)
    key = f"Authorization: Bearer {API_KEY}\r\n" if with_key else ""
    with socket.create_connection((host, port), timeout=10) as sock:
        t0 = time.perf_counter()
        sock.sendall(
            f"POST /v1/score HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{key}"
            f"Content-Length: {2**30}\r\n\r\n{{}}".encode()
        )
        data = _read_response(sock, 10)
        elapsed = time.perf_counter() - t0
    status = int(data.split(b" ", 2)[1])
    assert status == (413 if with_key else 401), data[:300]
    assert elapsed < 2.0, f"took {elapsed:.1f} s: the server waited for the body"
    body = orjson.loads(data.split(b"\r\n\r\n", 1)[1])
    assert ErrorResponse.model_validate(body).error.code == ("payload_too_large" if with_key else "unauthorized")


def test_chunked_body_growing_past_the_limit_is_cut_off(tiny_server: ServerHandle) -> None:
    host, port = _raw(tiny_server.url)
    chunk = b" " * 65_536
    sent = 0
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(
            f"POST /v1/score HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {API_KEY}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        )
        answered = False
        # Keep sending up to 4x the limit; stop as soon as the server answers.
        while sent < 4 * BODY_LIMIT:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                answered = True
                break
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                answered = True
                break
            sent += len(chunk)
        data = _read_response(sock, 10)
    assert answered, "the server read 4x its body limit without answering"
    assert data.startswith(b"HTTP/1.1 413"), data[:300]
    # Cut off near the limit: socket buffers hold a few MiB at most.
    assert sent <= BODY_LIMIT + 8 * 2**20, f"sent {sent / 2**20:.0f} MiB before the 413"


def test_body_limit_applies_to_declared_length_at_exactly_the_limit(
    tiny_server: ServerHandle, auth_headers: dict[str, str]
) -> None:
    host, port = _raw(tiny_server.url)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/score",
            body=b" " * (BODY_LIMIT + 1),
            headers={"Content-Type": "application/json", **auth_headers},
        )
        resp = conn.getresponse()
        assert resp.status == 413
        resp.read()
    finally:
        conn.close()
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request(
            "POST", "/v1/score", body=b" " * BODY_LIMIT, headers={"Content-Type": "application/json", **auth_headers}
        )
        resp = conn.getresponse()
        assert resp.status == 400  # at the limit the body is read, and is not JSON
        assert orjson.loads(resp.read())["error"]["code"] == "malformed_json"
    finally:
        conn.close()
