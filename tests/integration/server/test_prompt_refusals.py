"""Prompts the scoring rules cannot score against: clear 400s, before any transcription.

A real server (tiny.en, in process, on loopback) with the ``seed-tts-eval`` normalizer.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from audio_reward.protocol import encode_f32, validate_message
from tests.testkit.probes import read_metrics
from tests.testkit.server import inprocess_server
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def seed_url() -> Iterator[str]:
    with inprocess_server(normalizer="seed-tts-eval", max_wait_ms=5) as (url, _):
        yield url


def _body(prompt: str, **extra: object) -> dict[str, object]:
    audio, rate = synth_speech(TEXT)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": len(audio),
            "sample_rate": rate, "prompt": prompt, **extra}


def _engine_calls(url: str) -> float:
    return read_metrics(url)["audio_reward_batch_size_count{}"]


@pytest.mark.parametrize("prompt", ["", "   ", "\t\n", "\u3000\u00a0"])
def test_empty_prompt_is_a_400_before_transcription(seed_url: str, prompt: str) -> None:
    before = _engine_calls(seed_url)
    r = httpx.post(f"{seed_url}/v1/score", json=_body(prompt), timeout=60)
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["path"], error["retryable"]) == ("empty_reference", "$.prompt", False)
    assert "prompt is empty" in error["message"]
    assert validate_message(r.json(), "error")[1] == []
    assert _engine_calls(seed_url) == before


@pytest.mark.parametrize("prompt", ["...", "—!?", "「」。"])
def test_prompt_with_nothing_left_after_normalization_is_empty_reference(seed_url: str, prompt: str) -> None:
    r = httpx.post(f"{seed_url}/v1/score", json=_body(prompt), timeout=60)
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["path"]) == ("empty_reference", "$.prompt")
    assert error["message"].startswith(f"prompt {prompt!r} has no words left after seed-tts-eval normalization")


def test_language_outside_seed_tts_eval_is_a_400(seed_url: str) -> None:
    r = httpx.post(f"{seed_url}/v1/score", json=_body(TEXT, language="fr"), timeout=60)
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["code"], error["path"]) == ("unsupported_language", "$.language")
    assert "seed-tts-eval normalizer has rules for en, zh only, not language 'fr'" in error["message"]


def test_batch_refuses_only_the_empty_prompt_items(seed_url: str) -> None:
    body = {"protocol_version": "1", "items": [_body(TEXT), _body(" "), _body("..."), _body(TEXT)]}
    r = httpx.post(f"{seed_url}/v1/score/batch", json=body, timeout=120)
    assert r.status_code == 200
    results = r.json()["results"]
    assert results[0]["score"] >= 0.9 and results[3]["score"] >= 0.9
    assert results[0]["normalized_reference"] == "the quick brown fox jumps over the lazy dog"
    assert results[1]["error"]["code"] == "empty_reference"
    assert results[2]["error"]["code"] == "empty_reference"
    assert validate_message(r.json(), "batch_response")[1] == []
