"""Scoring through a real ``audio-reward serve`` (tiny.en) on loopback."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import math

import httpx
import numpy as np
import pytest

from audio_reward.protocol import (
    PROTOCOL_VERSION,
    encode_f32,
    encode_file,
    validate_message,
)
from audio_reward.scorer_server.engines import EngineConfig
from audio_reward.scorer_server.engines.faster_whisper_engine import FasterWhisperEngine
from audio_reward.scorer_server.engines.model_store import PINNED_SHA256
from tests.testkit.probes import read_metrics
from tests.testkit.server import inprocess_server, running_server
from tests.testkit.speech import espeak_available, espeak_speech, synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."
OTHER = "Seven purple elephants were painting the kitchen on a rainy Tuesday."


def request_body(text: str, prompt: str, **extra: object) -> dict[str, object]:
    audio, rate = synth_speech(text)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": len(audio),
            "sample_rate": rate, "prompt": prompt, **extra}


def test_own_text_scores_high_and_another_text_low(scorer_url: str) -> None:
    good = httpx.post(f"{scorer_url}/v1/score", json=request_body(TEXT, TEXT), timeout=60)
    bad = httpx.post(f"{scorer_url}/v1/score", json=request_body(TEXT, OTHER), timeout=60)
    assert good.status_code == 200 and bad.status_code == 200
    assert good.json()["score"] >= 0.9
    assert good.json()["cer"] <= 0.1
    assert bad.json()["score"] <= 0.4
    assert good.json()["score"] - bad.json()["score"] >= 0.5


def test_robotic_speech_scores_below_natural_speech(scorer_url: str) -> None:
    robot, rate = espeak_speech(OTHER)
    body = {"protocol_version": "1", "waveform_f32_base64": encode_f32(robot), "sample_rate": rate, "prompt": OTHER}
    robotic = httpx.post(f"{scorer_url}/v1/score", json=body, timeout=60).json()
    natural = httpx.post(f"{scorer_url}/v1/score", json=request_body(OTHER, OTHER), timeout=60).json()
    assert natural["score"] >= 0.9
    assert robotic["score"] < natural["score"]


def test_request_built_like_verl_omni_client_on_compat_path(scorer_url: str) -> None:
    # Exactly what verl-omni's audio_http_scorer_client sends: json.dumps over float32 LE base64.
    audio, rate = synth_speech(TEXT)
    payload = {
        "protocol_version": "1",
        "waveform_f32_base64": base64.b64encode(np.asarray(audio, dtype="<f4").tobytes()).decode("ascii"),
        "num_samples": int(audio.shape[0]),
        "sample_rate": int(rate),
        "prompt": TEXT,
        "metadata": {"index": 3, "split": "train", "weight": 0.5, "flag": True, "note": None},
    }
    r = httpx.post(f"{scorer_url}/score", content=json.dumps(payload).encode(),
                   headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 200
    body = r.json()
    # verl-omni's client accepts only a flat object of scalars with a finite score.
    assert isinstance(body["score"], float) and math.isfinite(body["score"])
    assert all(v is None or isinstance(v, (str, int, float, bool)) for v in body.values())
    assert all(math.isfinite(v) for v in body.values() if isinstance(v, float))
    assert body["score"] >= 0.9
    assert body["protocol_version"] == PROTOCOL_VERSION
    assert body["model"] == "tiny.en" and body["engine"] == "faster-whisper"
    assert body["reward_formula"] == "1-cer"
    assert body["request_id"] == r.headers["x-request-id"]
    assert validate_message(body, "score_response")[1] == []


def test_wav_file_encoding_and_request_id_echo(scorer_url: str) -> None:
    audio, rate = synth_speech(TEXT)
    body = {"protocol_version": "1", "audio_file_base64": encode_file(audio, rate), "prompt": TEXT,
            "request_id": "rollout-7-sample-2", "language": "en"}
    r = httpx.post(f"{scorer_url}/v1/score", json=body, timeout=60)
    assert r.status_code == 200
    assert r.json()["request_id"] == "rollout-7-sample-2"
    assert r.json()["score"] >= 0.9
    assert r.json()["language"] == "en"


def test_reward_options_change_the_formula(scorer_url: str) -> None:
    plain = httpx.post(f"{scorer_url}/v1/score", json=request_body(TEXT, OTHER), timeout=60).json()
    shaped = httpx.post(
        f"{scorer_url}/v1/score", json=request_body(TEXT, OTHER, reward={"formula": "exp", "exp_k": 5.0}), timeout=60
    ).json()
    assert shaped["reward_formula"] == "exp"
    assert shaped["score"] == pytest.approx(math.exp(-5.0 * min(shaped["error_rate"], 1.0)), rel=1e-6)
    assert plain["reward_formula"] == "1-cer"


def test_batch_with_a_bad_item_in_the_middle(scorer_url: str) -> None:
    bad = {"prompt": TEXT, "waveform_f32_base64": "not base64!!", "sample_rate": 16000}
    body = {"protocol_version": "1", "items": [request_body(TEXT, TEXT), bad, request_body(OTHER, OTHER)]}
    r = httpx.post(f"{scorer_url}/v1/score/batch", json=body, timeout=120)
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 3
    assert results[0]["score"] >= 0.9 and results[0]["normalized_reference"].startswith("the quick")
    assert results[1]["error"]["code"] == "invalid_base64"
    assert results[1]["error"]["retryable"] is False
    assert results[1]["error"]["path"] == "$.items[1].waveform_f32_base64"
    assert results[2]["score"] >= 0.9 and results[2]["normalized_reference"].startswith("seven purple")
    assert validate_message(r.json(), "batch_response")[1] == []


def batch_stats(url: str) -> tuple[float, float]:
    """(engine calls, utterances) from the batch-size histogram."""
    values = read_metrics(url)
    return values["audio_reward_batch_size_count{}"], values["audio_reward_batch_size_sum{}"]


def post_concurrently(url: str, bodies: list[dict[str, object]]) -> list[dict[str, object]]:
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        futures = [pool.submit(httpx.post, f"{url}/v1/score", json=b, timeout=120) for b in bodies]
        return [f.result().json() for f in futures]


def test_batched_false_sends_one_utterance_per_engine_call() -> None:
    engine = FasterWhisperEngine(EngineConfig(model="tiny.en", options={"batched": False}))
    with inprocess_server(engine, max_batch_size=8, max_wait_ms=50) as (url, _):
        assert httpx.get(f"{url}/v1/info").json()["batching"]["engine_batches"] is False
        calls_before, items_before = batch_stats(url)
        results = post_concurrently(url, [request_body(t, t) for t in (TEXT, OTHER, TEXT)])
        calls_after, items_after = batch_stats(url)
    assert items_after - items_before == 3 and calls_after - calls_before == 3
    assert min(float(r["score"]) for r in results) >= 0.9  # type: ignore[arg-type]


def test_batched_decoding_shares_engine_calls_and_keeps_results_apart() -> None:
    # The default on every device: one CTranslate2 call over many utterances, with the real weights.
    engine = FasterWhisperEngine(EngineConfig(model="tiny.en"))
    with inprocess_server(engine, max_batch_size=8, max_wait_ms=50) as (url, _):
        assert httpx.get(f"{url}/v1/info").json()["batching"]["engine_batches"] is True
        texts = [TEXT, OTHER] * 3
        calls_before, items_before = batch_stats(url)
        results = post_concurrently(url, [request_body(t, t) for t in texts])
        calls_after, items_after = batch_stats(url)
    assert items_after - items_before == len(texts)
    assert calls_after - calls_before < len(texts)  # some engine calls held several requests
    for text, result in zip(texts, results, strict=True):
        assert result["score"] >= 0.9  # type: ignore[operator]
        assert str(result["normalized_reference"]).startswith(text.lower()[:10])


def test_info_reports_model_and_limits(scorer_url: str) -> None:
    info = httpx.get(f"{scorer_url}/v1/info").json()
    assert info["protocol_version"] == "1" and info["supported_protocol_versions"] == ["1"]
    assert info["engine"]["name"] == "faster-whisper"
    assert info["engine"]["model_id"] == "tiny.en"
    assert info["engine"]["weights_sha256"] == PINNED_SHA256["tiny.en"]
    assert info["normalizer"] == "basic"
    assert info["reward"]["formula"] == "1-cer"
    assert info["limits"]["max_audio_seconds"] == 60.0
    assert info["ready"] is True and info["auth"] is False


def test_info_lists_the_endpoints_the_server_serves(scorer_url: str) -> None:
    endpoints = httpx.get(f"{scorer_url}/v1/info").json()["endpoints"]
    assert endpoints == ["/v1/score", "/score", "/v1/score/batch", "/v1/speakers", "/v1/audio/transcriptions",
                         "/v1/models", "/v1/info", "/healthz", "/readyz", "/metrics"]
    # Each is routed: a GET answers (405 for the POST-only ones), never 404.
    statuses = {path: httpx.get(f"{scorer_url}{path}", timeout=60).status_code for path in endpoints}
    assert 404 not in statuses.values(), statuses


def test_health_and_metrics(scorer_url: str) -> None:
    assert httpx.get(f"{scorer_url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{scorer_url}/readyz").status_code == 200
    httpx.post(f"{scorer_url}/score", json=request_body(TEXT, TEXT), timeout=60)
    httpx.post(f"{scorer_url}/v1/score", content=b"{", timeout=60)
    text = httpx.get(f"{scorer_url}/metrics").text
    assert 'audio_reward_requests_total{endpoint="/score",status="200"}' in text
    assert 'audio_reward_requests_total{endpoint="/v1/score",status="400"}' in text
    assert 'audio_reward_items_total{outcome="malformed_json"}' in text
    assert 'audio_reward_items_total{outcome="ok"}' in text
    for name in (
        "audio_reward_queue_depth",
        "audio_reward_batch_size_bucket",
        "audio_reward_audio_seconds_total",
        "audio_reward_engine_latency_seconds_bucket",
        "audio_reward_ready 1.0",
    ):
        assert name in text
    seconds = next(
        float(line.split()[1]) for line in text.splitlines() if line.startswith("audio_reward_audio_seconds_total")
    )
    assert seconds > 2.0


def test_openapi_documents_request_and_response_models(scorer_url: str) -> None:
    spec = httpx.get(f"{scorer_url}/openapi.json").json()
    for path, model in (
        ("/v1/score", "ScoreRequest"),
        ("/score", "ScoreRequest"),
        ("/v1/score/batch", "BatchScoreRequest"),
    ):
        body = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{model}"}
    schemas = spec["components"]["schemas"]
    assert {"ScoreRequest", "BatchScoreRequest", "ScoreResponse", "ErrorResponse", "RewardOptions"} <= set(schemas)
    assert "waveform_f32_base64" in schemas["ScoreRequest"]["properties"]
    assert "429" in spec["paths"]["/v1/score"]["post"]["responses"]


GERMAN = "Guten Morgen. Das Wetter ist heute sehr schön, und wir gehen in den Park."


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng (its German voice) is not installed")
def test_score_reports_the_language_the_model_detected() -> None:
    # Multilingual Whisper base, a German clip, no language in the request: /v1/score says what the
    # transcription endpoint says for the same clip, not "".
    audio, rate = espeak_speech(GERMAN, voice="de")
    wav = base64.b64decode(encode_file(audio, rate))
    with running_server(model="base", max_wait_ms=5, ready_timeout_s=300) as server:
        scored = httpx.post(f"{server.url}/v1/score", json={"protocol_version": "1", "prompt": GERMAN,
                                                            "audio_file_base64": encode_file(audio, rate)}, timeout=120)
        transcribed = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": ("de.wav", wav)},
                                 data={"model": "base", "response_format": "verbose_json"}, timeout=120)
        batch = httpx.post(f"{server.url}/v1/score/batch", json={"protocol_version": "1", "items": [
            {"prompt": GERMAN, "audio_file_base64": encode_file(audio, rate)},
            {"prompt": GERMAN, "audio_file_base64": encode_file(audio, rate), "language": "de"}]}, timeout=120)
    assert scored.status_code == 200 and transcribed.status_code == 200, (scored.text, transcribed.text)
    assert transcribed.json()["language"] == "de"
    assert scored.json()["language"] == "de"
    assert [r["language"] for r in batch.json()["results"]] == ["de", "de"]


def test_an_english_only_model_reports_english(scorer_url: str) -> None:
    assert httpx.post(f"{scorer_url}/v1/score", json=request_body(TEXT, TEXT), timeout=60).json()["language"] == "en"
