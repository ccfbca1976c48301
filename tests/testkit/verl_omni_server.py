"""A scorer that speaks verl-omni's audio scorer protocol v1 and nothing more.

The contract, as verl-omni's reference scorer (``whisper_cer_scorer.py`` of its
Qwen3-TTS recipe) and its client (``audio_http_scorer_client.py``) define it:
``POST /score`` with one JSON request (``protocol_version`` "1",
``waveform_f32_base64``, ``num_samples``, ``sample_rate``, ``prompt``,
``metadata``), answered by one flat JSON object holding a finite ``score``;
``GET /healthz``; every other path is ``404 {"error": "Not found."}``; a bad
request is ``400 {"error": "<text>"}`` (a string, not our error object); bodies
are at most 8 MiB.  No ``/v1/...`` path, no batches, no request-id echo.

Faults on demand: ``faults(n)`` is asked for the n-th ``POST /score`` (1-based)
and may answer ``"503"``, ``"drop"`` (close without an answer) or ``"slow"``.
Every request's method and path is counted, so a test can assert where the
client went and how often.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
from aiohttp import web

from .loopback import LoopbackServer

MAX_BODY = 8 * 2**20
Fault = Callable[[int], "str | None"]


def expected_score(waveform: np.ndarray) -> float:
    """What this scorer answers for a waveform: lets a test check each answer belongs to its item."""
    return round(1.0 - min(1.0, float(np.abs(waveform).mean()) * 10), 6)


class VerlOmniProtocolServer(LoopbackServer):
    """Runs on its own thread and event loop; ``url`` is the server root (``url + "/score"`` is the endpoint)."""

    max_body_bytes = MAX_BODY

    def __init__(self, faults: Fault = lambda n: None, slow_s: float = 2.0) -> None:
        super().__init__()
        self.faults = faults
        self.slow_s = slow_s
        self.paths: collections.Counter[str] = collections.Counter()
        self.scored = 0
        self._posts = 0
        self._lock = threading.Lock()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self.paths[f"{request.method} {request.path}"] += 1
        if request.method == "GET" and request.path == "/healthz":
            return web.json_response({"status": "ok"})
        if request.method != "POST" or request.path != "/score":
            return web.json_response({"error": "Not found."}, status=404)
        with self._lock:
            self._posts += 1
            fault = self.faults(self._posts)
        if fault == "503":
            return web.json_response({"error": "temporary"}, status=503)
        if fault == "drop":
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)  # never delivered
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        try:
            payload = await request.json()
            waveform, metadata = _decode(payload)
        except (ValueError, web.HTTPException) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        with self._lock:
            self.scored += 1
        return web.json_response({
            "score": expected_score(waveform), "cer": 0.0, "asr_text": payload["prompt"],
            "sample_id": str(metadata.get("id", "")),
        })


def _decode(payload: Any) -> tuple[np.ndarray, dict[str, Any]]:
    if not isinstance(payload, dict) or payload.get("protocol_version") != "1":
        raise ValueError("Audio scorer requires protocol_version='1'.")
    encoded = payload.get("waveform_f32_base64")
    if not isinstance(encoded, str):
        raise ValueError("waveform_f32_base64 must be a base64 string.")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("waveform_f32_base64 is not valid base64.") from None
    if len(raw) % 4:
        raise ValueError("Decoded waveform byte length is not float32-aligned.")
    waveform = np.frombuffer(raw, dtype="<f4")
    num_samples, rate = payload.get("num_samples"), payload.get("sample_rate")
    if isinstance(num_samples, bool) or num_samples != waveform.size:
        raise ValueError("num_samples does not match the decoded waveform.")
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError("sample_rate must be a positive integer.")
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("Audio scorer requires a non-empty prompt.")
    metadata = payload.get("metadata")
    if not isinstance(metadata, dict):
        raise ValueError("metadata must be a JSON object.")
    return waveform, metadata
