"""The FunASR engine (Paraformer, Seed-TTS-eval's Chinese ASR) on a tiny random Paraformer, through a real server.

Runs in the FunASR environment (``scripts/envs/funasr.sh``); skipped where
FunASR is not installed.  The model folder is built from FunASR's own classes
and a config written here (:func:`tests.testkit.random_checkpoints.build_random_paraformer`)
and loaded by FunASR's ``AutoModel`` exactly as a downloaded ``paraformer-zh``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("funasr", reason="needs FunASR: scripts/envs/funasr.sh builds its environment")

from audio_reward.protocol import encode_f32
from tests.testkit.probes import read_metrics
from tests.testkit.random_checkpoints import build_random_paraformer
from tests.testkit.server import REPO_ROOT, ServerHandle, running_server


@pytest.fixture(scope="module")
def paraformer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_random_paraformer(tmp_path_factory.mktemp("paraformer"))


@pytest.fixture(scope="module")
def server(paraformer: Path) -> Iterator[ServerHandle]:
    with running_server(preset="seed-tts-eval-zh", model=str(paraformer), python=sys.executable,
                        max_wait_ms=50) as handle:
        yield handle


def noise(seconds: float, seed: int) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(16000 * seconds))).astype(np.float32)


def benchmark_transcript(folder: Path, audio: np.ndarray, tmp_path: Path) -> str:
    """Seed-TTS-eval's run_wer.py, for one file: AutoModel(...).generate(input=path, batch_size_s=300)[0]["text"]."""
    import soundfile as sf
    import zhconv
    from funasr import AutoModel

    path = tmp_path / "clip.wav"
    sf.write(path, audio, 16000)
    model = AutoModel(model=str(folder), device="cpu", disable_update=True, disable_pbar=True)
    return str(zhconv.convert(model.generate(input=str(path), batch_size_s=300)[0]["text"], "zh-cn"))


def test_preset_scores_chinese_with_the_benchmarks_transcript(server: ServerHandle, paraformer: Path,
                                                              tmp_path: Path) -> None:
    info = httpx.get(f"{server.url}/v1/info", timeout=10).json()
    assert info["engine"]["name"] == "funasr" and info["preset"] == "seed-tts-eval-zh"
    assert info["normalizer"] == "seed-tts-eval" and info["default_language"] == "zh"
    audio = noise(2.0, seed=0)
    expected = benchmark_transcript(paraformer, audio, tmp_path)
    assert expected  # random weights still emit characters of the tiny vocabulary
    body = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "sample_rate": 16000,
            "prompt": expected}
    r = httpx.post(f"{server.url}/v1/score", json=body, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["engine"] == "funasr" and out["language"] == "zh" and out["char_level"]
    assert out["transcript"] == expected  # the same text as the benchmark's own call on the same audio
    assert out["cer"] == 0.0 and out["score"] == 1.0
    assert out["normalized_reference"] == " ".join(expected)  # seed-tts-eval's zh rule: one character a word


def test_a_batch_scores_each_clip_as_alone(server: ServerHandle, paraformer: Path, tmp_path: Path) -> None:
    before = read_metrics(server.url).get("audio_reward_batch_size_count{}", 0)
    clips = [noise(s, seed=i) for i, s in enumerate((1.5, 3.0, 2.2), start=5)]
    items = [{"waveform_f32_base64": encode_f32(c), "sample_rate": 16000, "prompt": "你好世界"} for c in clips]
    r = httpx.post(f"{server.url}/v1/score/batch", json={"protocol_version": "1", "items": items}, timeout=60)
    assert r.status_code == 200, r.text
    got = [item["transcript"] for item in r.json()["results"]]
    assert got == [benchmark_transcript(paraformer, c, tmp_path) for c in clips]
    # One utterance per engine call, as the benchmark decodes one file at a time (a padded batch can differ).
    assert read_metrics(server.url)["audio_reward_batch_size_count{}"] - before == len(clips)


def test_a_language_other_than_chinese_is_refused(server: ServerHandle) -> None:
    body = {"protocol_version": "1", "waveform_f32_base64": encode_f32(noise(1.0, seed=1)), "sample_rate": 16000,
            "prompt": "hello", "language": "en"}
    r = httpx.post(f"{server.url}/v1/score", json=body, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "unsupported_language"


def test_the_hub_name_without_a_local_folder_is_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--preset", "seed-tts-eval-zh",
                           "--port", "0"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    # (Other lines may be third-party warnings at import, such as zhconv's about pkg_resources.)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("audio-reward serve:")]
    assert len(lines) == 1, proc.stderr
    assert "'paraformer-zh' has no local copy" in lines[0] and "--model DIR" in lines[0]
    assert "iic/speech_seaco_paraformer_large_asr_nat-zh-cn-16k-common-vocab8404-pytorch" in lines[0]


def test_batched_option_decodes_a_batch_in_one_call(paraformer: Path) -> None:
    from audio_reward.scorer_server.engines import EngineConfig, TranscriptionInput, create_engine

    engine = create_engine("funasr", EngineConfig(model=str(paraformer), options={"batched": "true"}))
    assert engine.prefers_batches
    engine.load()
    calls = []
    generate = engine._model.generate  # type: ignore[attr-defined]

    def counted(**kwargs: object) -> object:
        calls.append(kwargs["batch_size"])
        return generate(**kwargs)

    engine._model.generate = counted  # type: ignore[attr-defined]
    out = engine.transcribe_batch_sync([TranscriptionInput(noise(s, seed=i)) for i, s in enumerate((1.0, 2.0))])
    assert calls == [2] and len(out) == 2 and all(t.text and t.language == "zh" for t in out)
    engine.close()
