"""Speaker similarity and DNSMOS through a real ``audio-reward serve`` (tiny.en, resemblyzer, DNSMOS) on loopback.

Voices: espeak-ng's ``en-us+m3`` and ``en-us+f4`` and hibari's one voice are three speakers; two
sentences of one voice are the same speaker.  The noisy clip is hibari speech with white noise added.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest
import soxr

from audio_reward.protocol import encode_f32, encode_file, validate_message
from tests.testkit.probes import read_metrics
from tests.testkit.server import server_process
from tests.testkit.speech import SENTENCES, espeak_available, espeak_speech, synth_speech

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed")

SAME, OTHER = "en-us+m3", "en-us+f4"


def _item(audio: np.ndarray, rate: int, prompt: str, **extra: object) -> dict[str, object]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "sample_rate": rate,
            "prompt": prompt, **extra}


def _register(url: str, audio: np.ndarray, rate: int) -> dict[str, object]:
    answer = httpx.post(f"{url}/v1/speakers", json={"protocol_version": "1", "audio_file_base64":
                                                    encode_file(audio, rate)}, timeout=60)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert validate_message(body, "speaker_response")[1] == []
    return body


def _noisy(audio: np.ndarray) -> np.ndarray:
    noise = np.random.default_rng(0).standard_normal(len(audio)).astype(np.float32)
    return np.clip(audio + 0.05 * noise, -1.0, 1.0)


def test_a_registered_reference_ranks_its_own_speaker_first_in_a_batch(signals_url: str) -> None:
    reference, rate = espeak_speech(SENTENCES[0], SAME)
    registered = _register(signals_url, reference, rate)
    same, same_rate = espeak_speech(SENTENCES[1], SAME)
    other, other_rate = espeak_speech(SENTENCES[1], OTHER)
    hibari, hibari_rate = synth_speech(SENTENCES[1])
    rid = registered["speaker_reference_id"]
    reward = {"speaker_weight": 0.5}
    items = [_item(same, same_rate, SENTENCES[1], speaker_reference_id=rid, reward=reward, measure_quality=True),
             _item(other, other_rate, SENTENCES[1], speaker_reference_id=rid, reward=reward, measure_quality=True),
             _item(hibari, hibari_rate, SENTENCES[1], speaker_reference_id=rid, reward=reward, measure_quality=True)]
    answer = httpx.post(f"{signals_url}/v1/score/batch", json={"protocol_version": "1", "items": items}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert validate_message(answer.json(), "batch_response")[1] == []
    same_r, other_r, hibari_r = answer.json()["results"]
    assert same_r["speaker_similarity"] > other_r["speaker_similarity"] + 0.15
    assert same_r["speaker_similarity"] > hibari_r["speaker_similarity"] + 0.15
    for result in (same_r, other_r, hibari_r):
        assert result["speaker_reference_id"] == rid
        assert result["score"] == pytest.approx(0.5 * result["reward_asr"] + 0.5 * result["reward_speaker"])
        assert 1.0 <= result["dnsmos_ovrl"] <= 5.0 and 1.0 <= result["dnsmos_p808"] <= 5.0


def test_an_inline_reference_gives_the_registered_answer_and_is_kept(signals_url: str) -> None:
    reference, rate = espeak_speech(SENTENCES[2], OTHER)
    candidate, candidate_rate = espeak_speech(SENTENCES[3], OTHER)
    inline = httpx.post(f"{signals_url}/v1/score", json=_item(
        candidate, candidate_rate, SENTENCES[3], speaker_reference_audio_base64=encode_file(reference, rate)),
        timeout=60)
    assert inline.status_code == 200, inline.text
    rid = _register(signals_url, reference, rate)["speaker_reference_id"]
    assert inline.json()["speaker_reference_id"] == rid  # the sha256 of the same 16 kHz samples
    by_id = httpx.post(f"{signals_url}/v1/score", json=_item(candidate, candidate_rate, SENTENCES[3],
                                                             speaker_reference_id=rid), timeout=60).json()
    assert by_id["speaker_similarity"] == pytest.approx(inline.json()["speaker_similarity"], abs=1e-6)
    assert by_id["score"] == inline.json()["score"]  # weight 0: the similarity is reported, the score unchanged


def test_dnsmos_ranks_clean_speech_above_the_same_speech_with_noise(signals_url: str) -> None:
    clean, rate = synth_speech(SENTENCES[0])
    single = [httpx.post(f"{signals_url}/v1/score", json=_item(audio, rate, SENTENCES[0], measure_quality=True),
                         timeout=60).json() for audio in (clean, _noisy(clean))]
    items = [_item(clean, rate, SENTENCES[0], reward={"quality_weight": 0.5}),
             _item(_noisy(clean), rate, SENTENCES[0], reward={"quality_weight": 0.5})]
    batch = httpx.post(f"{signals_url}/v1/score/batch", json={"protocol_version": "1", "items": items},
                       timeout=60).json()["results"]
    for clean_r, noisy_r in (single, batch):
        assert clean_r["dnsmos_ovrl"] > noisy_r["dnsmos_ovrl"] + 0.5
        assert clean_r["dnsmos_bak"] > noisy_r["dnsmos_bak"] + 0.5
    assert batch[0]["dnsmos_ovrl"] == pytest.approx(single[0]["dnsmos_ovrl"], abs=1e-4)  # batched as alone
    assert batch[0]["score"] > batch[1]["score"]
    assert batch[0]["score"] == pytest.approx(0.5 * batch[0]["reward_asr"] + 0.5 * batch[0]["reward_quality"])
    assert "speaker_similarity" not in single[0]
    assert single[0]["quality_weight"] == 0.0 and single[0]["score"] == single[0]["reward_asr"]


def _quality_calls(url: str) -> float:
    return read_metrics(url).get('audio_reward_signal_latency_seconds_count{signal="quality"}', 0.0)


def test_dnsmos_runs_only_for_a_request_that_weighs_or_asks_for_it(signals_url: str, scorer_url: str) -> None:
    speech, rate = synth_speech(SENTENCES[2])
    before = _quality_calls(signals_url)
    plain = httpx.post(f"{signals_url}/v1/score", json=_item(speech, rate, SENTENCES[2]), timeout=60)
    assert plain.status_code == 200, plain.text
    assert _quality_calls(signals_url) == before  # the model was not run
    without_signals = httpx.post(f"{scorer_url}/v1/score", json=_item(speech, rate, SENTENCES[2]), timeout=60).json()
    assert set(plain.json()) - {"request_id"} == set(without_signals) - {"request_id"}
    assert plain.json()["score"] == without_signals["score"]
    asked = httpx.post(f"{signals_url}/v1/score", json=_item(speech, rate, SENTENCES[2], measure_quality=True),
                       timeout=60).json()
    weighed = httpx.post(f"{signals_url}/v1/score", json=_item(speech, rate, SENTENCES[2],
                                                                reward={"quality_weight": 0.2}), timeout=60).json()
    assert _quality_calls(signals_url) == before + 2
    assert asked["dnsmos_ovrl"] == pytest.approx(weighed["dnsmos_ovrl"], abs=1e-6)
    assert asked["score"] == plain.json()["score"]  # measured, not weighed
    assert weighed["score"] == pytest.approx(0.8 * weighed["reward_asr"] + 0.2 * weighed["reward_quality"])


def _error(answer: httpx.Response, status: int) -> str:
    assert answer.status_code == status, answer.text
    return str(answer.json()["error"]["code"])


def test_unscorable_references_are_refused_before_scoring(signals_url: str) -> None:
    speech, rate = synth_speech(SENTENCES[0])
    short = speech[: rate // 2]
    assert _error(httpx.post(f"{signals_url}/v1/speakers", json={
        "protocol_version": "1", "waveform_f32_base64": encode_f32(short), "sample_rate": rate}, timeout=30),
        400) == "speaker_reference_too_short"
    assert _error(httpx.post(f"{signals_url}/v1/score", json=_item(
        speech, rate, SENTENCES[0], speaker_reference_audio_base64=encode_file(short, rate)), timeout=30),
        400) == "speaker_reference_too_short"
    assert _error(httpx.post(f"{signals_url}/v1/score", json=_item(
        speech, rate, SENTENCES[0], reward={"speaker_weight": 0.3}), timeout=30), 400) == "missing_speaker_reference"
    long = np.tile(speech, int(61 * rate / len(speech)) + 1)
    assert _error(httpx.post(f"{signals_url}/v1/speakers", json={
        "protocol_version": "1", "audio_file_base64": encode_file(long, rate)}, timeout=60), 400) == "audio_too_long"
    unknown = "0" * 64
    assert _error(httpx.post(f"{signals_url}/v1/score", json=_item(
        speech, rate, SENTENCES[0], speaker_reference_id=unknown), timeout=30), 404) == "unknown_speaker_reference"


def test_an_evicted_reference_is_404_until_registered_again(signals_url: str) -> None:
    voices = [espeak_speech(SENTENCES[0], voice) for voice in ("en-us+m1", "en-us+f2", "en-us+m5")]
    first = _register(signals_url, *voices[0])["speaker_reference_id"]
    for audio, rate in voices[1:]:  # the server keeps two references
        _register(signals_url, audio, rate)
    speech, rate = synth_speech(SENTENCES[0])
    body = _item(speech, rate, SENTENCES[0], speaker_reference_id=first)
    assert _error(httpx.post(f"{signals_url}/v1/score", json=body, timeout=30), 404) == "unknown_speaker_reference"
    assert _register(signals_url, *voices[0])["speaker_reference_id"] == first
    assert httpx.post(f"{signals_url}/v1/score", json=body, timeout=30).status_code == 200


def test_info_metrics_and_readiness_name_the_signals(signals_url: str) -> None:
    info = httpx.get(f"{signals_url}/v1/info", timeout=10).json()["signals"]
    assert info["speaker"]["engine"] == "resemblyzer" and info["speaker"]["ready"]
    assert info["quality"]["engine"] == "dnsmos" and info["quality"]["ready"]
    assert info["speaker_references"]["max_count"] == 2
    assert "/v1/speakers" in httpx.get(f"{signals_url}/v1/info", timeout=10).json()["endpoints"]
    ready = httpx.get(f"{signals_url}/readyz", timeout=10).json()
    assert ready["signals"] == {"speaker": info["speaker"]["model_id"], "quality": info["quality"]["model_id"]}
    speech, rate = synth_speech(SENTENCES[1])
    assert httpx.post(f"{signals_url}/v1/score", json=_item(speech, rate, SENTENCES[1], measure_quality=True),
                      timeout=60).status_code == 200
    metrics = read_metrics(signals_url)
    assert metrics['audio_reward_signal_latency_seconds_count{signal="quality"}'] >= 1
    assert metrics['audio_reward_signal_latency_seconds_count{signal="speaker"}'] >= 1


def test_a_server_without_signals_names_the_flag_that_loads_them(scorer_url: str) -> None:
    speech, rate = synth_speech(SENTENCES[0])
    reference = soxr.resample(speech, rate, 16_000).astype(np.float32)
    answer = httpx.post(f"{scorer_url}/v1/score", json=_item(
        speech, rate, SENTENCES[0], speaker_reference_audio_base64=encode_file(reference, 16_000)), timeout=30)
    assert _error(answer, 400) == "signal_unavailable"
    assert "--speaker-model resemblyzer" in answer.json()["error"]["message"]
    answer = httpx.post(f"{scorer_url}/v1/score", json=_item(speech, rate, SENTENCES[0],
                                                             reward={"quality_weight": 0.2}), timeout=30)
    assert _error(answer, 400) == "signal_unavailable"
    assert "--quality-model dnsmos" in answer.json()["error"]["message"]
    answer = httpx.post(f"{scorer_url}/v1/score", json=_item(speech, rate, SENTENCES[0], measure_quality=True),
                        timeout=30)
    assert _error(answer, 400) == "signal_unavailable"
    assert answer.json()["error"]["path"] == "$.measure_quality"
    plain = httpx.post(f"{scorer_url}/v1/score", json=_item(speech, rate, SENTENCES[0]), timeout=30).json()
    assert not {"speaker_similarity", "dnsmos_ovrl", "reward_asr"} & set(plain)  # nothing asked, nothing added


def test_a_speaker_model_that_cannot_load_stops_the_server_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-wavlm"
    with server_process(model="tiny.en", speaker_model=str(missing)) as server:
        server.proc.wait(timeout=180)
        log = server.log_tail(20_000)
    assert "a signal model failed to load" in log and str(missing) in log
