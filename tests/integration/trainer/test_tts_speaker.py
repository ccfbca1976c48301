"""``audio-reward tts-speaker`` on a tiny random Qwen3-TTS Base model saved as released, in the TTS environment.

The file it writes is read back the way verl-omni's ``load_speaker_xvector``
does (``json.load`` then a ``(1, -1)`` float32 tensor) and must be as wide as
the talker's speaker slot. Skipped where qwen-tts is not installed
(scripts/envs/tts.sh builds the environment).
"""

# ruff: noqa: E402 - the imports below need qwen-tts, checked first (the module is skipped without it)

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("qwen_tts") is None:
    pytest.skip("qwen-tts is not installed (build the TTS environment with scripts/envs/tts.sh)",
                allow_module_level=True)

from tests.testkit import tiny_qwen3_tts as tiny

tiny.import_qwen_tts()

from audio_reward.cli import main as cli_main
from audio_reward.trainer_plugin.tts_speaker import read_speaker_embedding
from tests.testkit.speech import espeak_speech

DOCS = Path(__file__).resolve().parents[3] / "docs" / "training.md"
DOC_MODEL = "/models/Qwen3-TTS-12Hz-0.6B-Base"


@pytest.fixture(scope="module")
def base_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.save_tiny_qwen3_tts(tiny.build_tiny_qwen3_tts(model_type="base"),
                                    tmp_path_factory.mktemp("tiny-base"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import soundfile as sf

    wave, rate = espeak_speech("Please call Stella and ask her to bring these things.")
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    # stereo at espeak's 22.05 kHz: the tool averages the channels and resamples to the encoder's 24 kHz
    sf.write(path, np.stack([wave, 0.5 * wave], axis=1), rate)
    return path


def test_writes_the_file_verl_omni_reads(base_model: Path, reference: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "voice.json"
    assert cli_main(["tts-speaker", str(reference), "--out", str(out), "--model", str(base_model)]) == 0
    assert "32-value speaker embedding" in capsys.readouterr().out
    # verl-omni's load_speaker_xvector: json.load, then torch.tensor(..., float32).reshape(1, -1)
    xvector = torch.tensor(json.loads(out.read_text()), dtype=torch.float32).reshape(1, -1)
    assert xvector.shape == (1, tiny.SPEAKER_DIM) and torch.isfinite(xvector).all()
    assert xvector.abs().sum() > 0
    assert read_speaker_embedding(out) == pytest.approx(xvector.reshape(-1).tolist())

    # The same voice again gives the same embedding; another recording a different one.
    again = tmp_path / "again.json"
    assert cli_main(["tts-speaker", str(reference), "--out", str(again), "--model", str(base_model)]) == 0
    assert read_speaker_embedding(again) == pytest.approx(read_speaker_embedding(out), abs=1e-6)
    import soundfile as sf

    other_wave, other_rate = espeak_speech("A completely different sentence, spoken slowly.")
    other = tmp_path / "other.wav"
    sf.write(other, other_wave, other_rate)
    other_out = tmp_path / "other.json"
    assert cli_main(["tts-speaker", str(other), "--out", str(other_out), "--model", str(base_model)]) == 0
    assert not np.allclose(read_speaker_embedding(other_out), read_speaker_embedding(out))


def test_documented_command_runs_as_typed_in_this_environment(base_model: Path, reference: Path,
                                                              tmp_path: Path) -> None:
    """docs/training.md's line, run by this environment's ``audio-reward`` with the real torchaudio: no stand-in."""
    (line,) = [ln.strip() for ln in DOCS.read_text(encoding="utf-8").splitlines()
               if ln.strip().startswith("audio-reward tts-speaker ")]
    words = [str(base_model) if w == DOC_MODEL else w for w in shlex.split(line)]
    assert words[:3] == ["audio-reward", "tts-speaker", "voice.wav"] and str(base_model) in words
    (tmp_path / "voice.wav").write_bytes(reference.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MODEL_PATH")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"wrote a {tiny.SPEAKER_DIM}-value speaker embedding of voice.wav to voice.json" in done.stdout
    assert len(read_speaker_embedding(tmp_path / "voice.json")) == tiny.SPEAKER_DIM
    import torchaudio

    assert not torchaudio._extension._IS_TORCHAUDIO_EXT_AVAILABLE  # the wheel's Python, its library removed
    assert "site-packages" in str(Path(torchaudio.__file__))


def test_refuses_a_model_without_speaker_encoder_and_bad_input(tmp_path: Path, reference: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    custom = tiny.save_tiny_qwen3_tts(tiny.build_tiny_qwen3_tts(), tmp_path / "custom")
    out = tmp_path / "voice.json"
    assert cli_main(["tts-speaker", str(reference), "--out", str(out), "--model", str(custom)]) == 1
    assert "speaker encoder is in the Base model" in capsys.readouterr().err and not out.exists()
    assert cli_main(["tts-speaker", str(tmp_path / "missing.wav"), "--out", str(out), "--model", str(custom)]) == 2
    assert "missing.wav does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("content, problem", [("{\"x\": 1}", "JSON list of finite numbers"),
                                              ("[1.0, NaN]", "finite"), ("[1.0,", "not JSON")])
def test_reader_names_what_is_wrong(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        read_speaker_embedding(path)
