"""Presets through the real ``audio-reward serve``: the transformers engine behind --preset."""

from __future__ import annotations

import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

pytest.importorskip("transformers")

from audio_reward.protocol import encode_f32
from audio_reward.scorer_server.presets import PRESETS, get_preset
from audio_reward.scorer_server.settings import ServerSettings
from tests.testkit.server import REPO_ROOT, running_server
from tests.testkit.speech import synth_speech

TEXT = "She sells sea shells by the sea shore."


def _body(text: str) -> dict[str, object]:
    audio, rate = synth_speech(text)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "sample_rate": rate, "prompt": text}


def test_presets_fix_engine_model_normalizer_and_language() -> None:
    s = ServerSettings(preset="seed-tts-eval-en")
    assert (s.engine, s.model, s.normalizer, s.language, s.beam_size) == (
        "transformers", "openai/whisper-large-v3", "seed-tts-eval", "en", 1)
    assert ServerSettings(preset="qwen3-asr").model == "Qwen/Qwen3-ASR-1.7B-hf"
    assert ServerSettings(preset="fast-en", model="base").model == "base"  # a flag beats the preset
    assert get_preset("qwen3-asr").model_for("vllm") == "Qwen/Qwen3-ASR-1.7B"
    assert get_preset("seed-tts-eval-en").model_for("transformers") == "openai/whisper-large-v3"
    s = ServerSettings(preset="seed-tts-eval-zh")
    assert (s.engine, s.model, s.normalizer, s.language, s.beam_size) == (
        "funasr", "paraformer-zh", "seed-tts-eval", "zh", 1)
    assert set(PRESETS) == {"seed-tts-eval-en", "seed-tts-eval-zh", "qwen3-asr", "fast-en"}
    with pytest.raises(ValueError, match="available"):
        get_preset("nope")


def test_seed_tts_eval_preset_serves_with_the_transformers_engine() -> None:
    """The preset's pipeline (transformers engine, English forced, Seed-TTS-eval normalization) on Whisper base."""
    with running_server(preset="seed-tts-eval-en", model="base", max_wait_ms=5, ready_timeout_s=300) as server:
        info = httpx.get(f"{server.url}/v1/info", timeout=30).json()
        assert info["preset"] == "seed-tts-eval-en" and info["normalizer"] == "seed-tts-eval"
        assert info["engine"]["name"] == "transformers" and info["engine"]["model_id"] == "base"
        assert info["default_language"] == "en"
        r = httpx.post(f"{server.url}/v1/score", json=_body(TEXT), timeout=120)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["score"] >= 0.9 and body["cer"] <= 0.1


def test_qwen3_asr_preset_serves_a_qwen3_asr_checkpoint(tiny_qwen3_asr: Path) -> None:
    """Random weights: the transcript is garbage, the request path through Qwen3-ASR is real."""
    with running_server(preset="qwen3-asr", model=str(tiny_qwen3_asr), max_wait_ms=5, ready_timeout_s=300) as server:
        info = httpx.get(f"{server.url}/v1/info", timeout=30).json()
        assert info["engine"]["extra"]["architecture"] == "qwen3_asr" and info["preset"] == "qwen3-asr"
        r = httpx.post(
            f"{server.url}/v1/score/batch",
            json={"protocol_version": "1", "items": [_body(TEXT), _body("Hi.")]},
            timeout=120,
        )
        assert r.status_code == 200, r.text
        for item in r.json()["results"]:
            assert 0.0 <= item["score"] <= 1.0 and isinstance(item["transcript"], str)


@pytest.mark.skipif(find_spec("funasr") is not None, reason="FunASR is installed here (its own tier tests it)")
def test_seed_tts_eval_zh_without_funasr_is_one_line_naming_the_extra() -> None:
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--preset", "seed-tts-eval-zh",
                           "--port", "0"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    # (Other lines may be third-party warnings at import, such as zhconv's about pkg_resources.)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("audio-reward serve:")]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "needs the 'funasr' extra" in lines[0] and "pip install -e '.[funasr]'" in lines[0]
