"""A real server's answers are the protocol's models, field for field and byte for byte.

Each answer validates with extras forbidden (every key the server sends is declared) and dumps back,
through the server's own encoder, to the bytes it sent: the models carry the wire as it is.
"""

from __future__ import annotations

import httpx
import numpy as np
import orjson
import pytest

from audio_reward.protocol import (
    BatchScoreResponse,
    ErrorResponse,
    InfoResponse,
    ScoreResponse,
    encode_f32,
    encode_file,
)
from audio_reward.scorer_client.core import ServerFacts, read_facts
from audio_reward.scorer_client.transport import Response
from audio_reward.scorer_server.http.responses import wire_json
from tests.testkit.speech import SENTENCES, espeak_available, synth_speech


def _item(audio: np.ndarray, rate: int, prompt: str, **extra: object) -> dict[str, object]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": int(audio.size),
            "sample_rate": rate, "prompt": prompt, **extra}


def _typed(raw: bytes) -> ScoreResponse:
    answer = ScoreResponse.model_validate_json(raw, extra="forbid")
    assert wire_json(answer) == raw
    return answer


def test_score_and_batch_answers_are_the_declared_models(scorer_url: str) -> None:
    audio, rate = synth_speech(SENTENCES[0])
    raw = httpx.post(f"{scorer_url}/v1/score", json=_item(audio, rate, SENTENCES[0], request_id="typed-1"),
                     timeout=120).content
    answer = _typed(raw)
    assert answer.request_id == "typed-1" and answer.cer is not None and answer.cer < 0.1
    assert answer.speaker_similarity is None and b"speaker_similarity" not in raw  # absent, not null

    batch = {"protocol_version": "1", "items": [_item(audio, rate, SENTENCES[0]), {**_item(audio, rate, "x"),
                                                                                   "num_samples": 3}]}
    raw = httpx.post(f"{scorer_url}/v1/score/batch", json=batch, timeout=120).content
    parsed = BatchScoreResponse.model_validate_json(raw)
    assert wire_json(parsed) == raw
    scored, failed = orjson.loads(raw)["results"]
    _typed(orjson.dumps(scored))
    assert isinstance(parsed.results[1], ErrorResponse) and parsed.results[1].error.code == "num_samples_mismatch"
    assert "request_id" in failed["error"] and parsed.results[1].error.path == "$.items[1].num_samples"


def test_info_is_the_info_model_and_the_client_reads_it_typed(scorer_url: str) -> None:
    answer = httpx.get(f"{scorer_url}/v1/info", timeout=30)
    raw = answer.content
    info = InfoResponse.model_validate_json(raw)
    assert wire_json(info) == raw
    assert info.ready and info.batching.scheduler == "micro-batches"
    assert info.signals is not None and info.signals.speaker is None and info.signals.quality is None
    facts = read_facts(Response(answer.status_code, raw))
    assert facts == ServerFacts(batch=True, max_audio_seconds=info.limits.max_audio_seconds)


@pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed")
def test_an_answer_with_signals_is_the_declared_model(signals_url: str) -> None:
    audio, rate = synth_speech(SENTENCES[1])
    reference, ref_rate = synth_speech(SENTENCES[2])
    raw = httpx.post(f"{signals_url}/v1/score", json=_item(
        audio, rate, SENTENCES[1], speaker_reference_audio_base64=encode_file(reference, ref_rate),
        reward={"speaker_weight": 0.25, "quality_weight": 0.25}), timeout=120).content
    answer = _typed(raw)
    assert answer.speaker_similarity is not None and answer.speaker_similarity > 0.5
    assert answer.dnsmos_ovrl is not None and answer.reward_quality is not None and answer.reward_asr is not None
    assert answer.speaker_reference_id is not None and answer.speaker_floor_applied is False
    info = InfoResponse.model_validate_json(httpx.get(f"{signals_url}/v1/info", timeout=30).content)
    assert info.signals is not None and info.signals.speaker is not None and info.signals.quality is not None
