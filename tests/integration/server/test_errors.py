"""Every error path of a real server answers the protocol's error shape."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from audio_reward.protocol import ErrorResponse, encode_f32
from tests.testkit.server import running_server
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."
API_KEY = "test-key-0123456789"


def assert_error(r: httpx.Response, status: int, code: str, *, retryable: bool = False) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    ErrorResponse.model_validate(body)
    assert set(body) == {"error"}
    assert body["error"]["code"] == code, body
    assert body["error"]["retryable"] is retryable
    assert "Traceback" not in r.text and "detail" not in body
    return body["error"]


def speech_body(**overrides: Any) -> dict[str, Any]:
    audio, rate = synth_speech(TEXT)
    body: dict[str, Any] = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                            "num_samples": len(audio), "sample_rate": rate, "prompt": TEXT}
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


@pytest.mark.parametrize(
    ("payload", "code", "path"),
    [
        (b"{not json", "malformed_json", "$"),
        (b"[1, 2]", "invalid_request", "$"),
        ({"protocol_version": "2", "prompt": TEXT}, "unsupported_protocol_version", "$.protocol_version"),
        ({"protocol_version": "1", "prompt": TEXT, "waveform_f32_base64": "AAAA"}, "missing_field", "$.sample_rate"),
        ({"prompt": TEXT, "waveform_f32_base64": "%%%", "sample_rate": 16000, "protocol_version": "1"},
         "invalid_base64", "$.waveform_f32_base64"),
        ("num_samples", "num_samples_mismatch", "$.num_samples"),
        ("nan", "non_finite_audio", "$.waveform_f32_base64"),
        ("long", "audio_too_long", "$.waveform_f32_base64"),
        ("reward", "invalid_reward_options", "$.reward"),
        ("extra", "unknown_field", "$.colour"),
        ("language", "unsupported_language", "$.language"),
    ],
)
def test_protocol_errors_are_400_with_code_and_path(scorer_url: str, payload: Any, code: str, path: str) -> None:
    if payload == "num_samples":
        payload = speech_body(num_samples=12)
    elif payload == "nan":
        payload = {"protocol_version": "1", "prompt": TEXT, "sample_rate": 16000,
                   "waveform_f32_base64": encode_f32(np.array([0.0, np.nan, 0.1], dtype=np.float32))}
    elif payload == "long":
        payload = {"protocol_version": "1", "prompt": TEXT, "sample_rate": 1000,
                   "waveform_f32_base64": encode_f32(np.zeros(61_000, dtype=np.float32))}
    elif payload == "reward":
        payload = speech_body(reward={"duration_ratio_min": 3.0, "duration_ratio_max": 2.0})
    elif payload == "extra":
        payload = speech_body(colour="blue")
    elif payload == "language":
        payload = speech_body(language="zh")  # tiny.en transcribes English only
    content = payload if isinstance(payload, bytes) else httpx.Request("POST", "/", json=payload).content
    for path_ in ("/v1/score", "/score"):
        r = httpx.post(
            f"{scorer_url}{path_}", content=content, headers={"Content-Type": "application/json"}, timeout=60
        )
        error = assert_error(r, 400, code)
        assert error["path"] == path
        assert error["request_id"] == r.headers["x-request-id"]


def test_language_is_checked_against_the_model_before_queueing(scorer_url: str) -> None:
    """A language the model cannot transcribe fails alone, never its batch-mates; spellings of English pass."""
    good = speech_body()
    r = httpx.post(
        f"{scorer_url}/v1/score/batch",
        timeout=120,
        json={
            "protocol_version": "1",
            "items": [dict(good, language="en-US"), dict(good, language="zz"), dict(good, language="english")],
        },
    )
    assert r.status_code == 200, r.text
    first, bad, last = r.json()["results"]
    assert first["score"] >= 0.9 and last["score"] >= 0.9
    assert bad["error"]["code"] == "unsupported_language" and bad["error"]["retryable"] is False
    assert "tiny.en" in bad["error"]["message"] and "en" in bad["error"]["message"]


def test_empty_body_and_bad_batch_envelope(scorer_url: str) -> None:
    assert_error(httpx.post(f"{scorer_url}/v1/score", content=b""), 400, "malformed_json")
    assert_error(
        httpx.post(f"{scorer_url}/v1/score/batch", json={"protocol_version": "1", "items": []}), 400, "invalid_request"
    )
    assert_error(
        httpx.post(f"{scorer_url}/v1/score/batch", json={"protocol_version": "9", "items": [{}]}),
        400,
        "unsupported_protocol_version",
    )


def test_unknown_path_and_wrong_method_use_protocol_shape(scorer_url: str) -> None:
    assert_error(httpx.get(f"{scorer_url}/v2/nothing"), 404, "not_found")
    assert_error(httpx.get(f"{scorer_url}/v1/score"), 405, "method_not_allowed")
    assert_error(httpx.put(f"{scorer_url}/score", json={}), 405, "method_not_allowed")


def test_client_request_id_header_is_kept(scorer_url: str) -> None:
    r = httpx.post(f"{scorer_url}/v1/score", content=b"{", headers={"X-Request-ID": "trainer-step-9"})
    assert r.headers["x-request-id"] == "trainer-step-9"
    assert assert_error(r, 400, "malformed_json")["request_id"] == "trainer-step-9"


@pytest.fixture(scope="module")
def guarded_url() -> Iterator[str]:
    """A server with an API key (from the environment) and small body and audio limits."""
    with running_server(
        model="tiny.en", max_body_bytes=600_000, max_audio_seconds=5, env={"AUDIO_REWARD_API_KEY": API_KEY}
    ) as server:
        yield server.url


def test_api_key_required_and_checked(guarded_url: str) -> None:
    body = speech_body()
    error = assert_error(httpx.post(f"{guarded_url}/v1/score", json=body, timeout=60), 401, "unauthorized")
    assert "API key" in error["message"]
    r = httpx.post(f"{guarded_url}/score", json=body, headers={"Authorization": "Bearer wrong"}, timeout=60)
    assert_error(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"
    assert_error(httpx.get(f"{guarded_url}/v1/info"), 401, "unauthorized")
    ok = httpx.post(f"{guarded_url}/v1/score", json=body, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60)
    assert ok.status_code == 200 and ok.json()["score"] >= 0.9
    ok = httpx.post(f"{guarded_url}/score", json=body, headers={"X-API-Key": API_KEY}, timeout=60)
    assert ok.status_code == 200
    info = httpx.get(f"{guarded_url}/v1/info", headers={"X-API-Key": API_KEY}).json()
    assert info["auth"] is True and API_KEY not in str(info)


def test_health_endpoints_need_no_key(guarded_url: str) -> None:
    assert httpx.get(f"{guarded_url}/healthz").status_code == 200
    assert httpx.get(f"{guarded_url}/readyz").status_code == 200
    assert httpx.get(f"{guarded_url}/metrics").status_code == 200


def test_oversized_body_is_413_from_content_length(guarded_url: str) -> None:
    big = b'{"protocol_version": "1", "prompt": "' + b"a" * 700_000 + b'"}'
    r = httpx.post(f"{guarded_url}/v1/score", content=big, headers={"X-API-Key": API_KEY})
    error = assert_error(r, 413, "payload_too_large")
    assert "600000" in error["message"]
    # In the units a user knows: the body in MiB, and the audio limit in seconds.
    assert "the request body of 0.7 MiB" in error["message"] and "limit of 0.6 MiB" in error["message"]
    assert "audio is limited to 5 s per utterance (max_audio_seconds)" in error["message"]


def test_oversized_chunked_body_is_413_while_streaming(guarded_url: str) -> None:
    def chunks() -> Iterator[bytes]:  # a generator body has no Content-Length: sent chunked
        yield b'{"protocol_version": "1", "prompt": "'
        for _ in range(20):
            yield b"a" * 50_000
        yield b'"}'

    r = httpx.post(f"{guarded_url}/v1/score/batch", content=chunks(), headers={"X-API-Key": API_KEY})
    assert "content-length" not in r.request.headers
    assert "5 s per utterance" in assert_error(r, 413, "payload_too_large")["message"]


def test_audio_over_the_servers_limit_is_400(guarded_url: str) -> None:
    audio = np.zeros(16_000 * 6, dtype=np.float32)
    body = {
        "protocol_version": "1",
        "prompt": TEXT,
        "sample_rate": 16_000,
        "waveform_pcm16_base64": base64.b64encode(audio.astype("<i2").tobytes()).decode(),
    }
    r = httpx.post(f"{guarded_url}/v1/score", json=body, headers={"X-API-Key": API_KEY})
    assert "limit is 5" in assert_error(r, 400, "audio_too_long")["message"]
