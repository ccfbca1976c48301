"""Errors a person can act on: what the server and ``serve`` say for the usual mistakes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest
import tomllib

from audio_reward.protocol import encode_f32, encode_file
from tests.testkit.server import REPO_ROOT
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."


def _post(url: str, payload: object) -> httpx.Response:
    return httpx.post(url, json=payload, timeout=60)


def test_non_audio_file_is_named_without_a_python_repr(scorer_url: str) -> None:
    for raw, says in [(b"just some notes\n" * 8, "looks like text"),
                      (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", "Portable Document Format")]:
        r = _post(f"{scorer_url}/v1/score", {"protocol_version": "1", "prompt": TEXT,
                                              "audio_file_base64": base64.b64encode(raw).decode()})
        error = r.json()["error"]
        assert r.status_code == 400 and error["code"] == "invalid_audio_file"
        assert says in error["message"] and "WAV, FLAC, MP3, OGG" in error["message"]
        assert "<_io" not in error["message"] and "0x" not in error["message"]


def test_missing_fields_are_named_as_missing(scorer_url: str) -> None:
    audio, rate = synth_speech(TEXT)
    body = {"waveform_f32_base64": encode_f32(audio), "sample_rate": rate, "prompt": TEXT}
    error = _post(f"{scorer_url}/v1/score", body).json()["error"]
    assert error["code"] == "missing_field" and error["path"] == "$.protocol_version"
    assert "'protocol_version' is missing" in error["message"] and "None" not in error["message"]
    batch = _post(f"{scorer_url}/v1/score/batch", {"items": [body]}).json()["error"]
    assert batch["code"] == "missing_field" and "'protocol_version' is missing" in batch["message"]
    no_prompt = _post(f"{scorer_url}/v1/score",
                      {"protocol_version": "1", "audio_file_base64": encode_file(audio, rate)})
    assert no_prompt.json()["error"]["message"] == "$.prompt: required field 'prompt' is missing"
    no_audio = _post(f"{scorer_url}/v1/score", {"protocol_version": "1", "prompt": TEXT}).json()["error"]
    assert no_audio["message"].startswith("$: the audio is missing: send one of waveform_f32_base64")


def test_multipart_to_the_batch_endpoint_and_raw_audio_get_415_with_a_hint(scorer_url: str) -> None:
    audio, rate = synth_speech(TEXT)
    wav = base64.b64decode(encode_file(audio, rate))
    r = httpx.post(f"{scorer_url}/v1/score/batch", files={"file": ("speech.wav", wav)}, data={"text": TEXT},
                   timeout=60)
    error = r.json()["error"]
    assert r.status_code == 415 and error["code"] == "unsupported_media_type", r.text
    assert "multipart/form-data to POST /v1/score" in error["message"] and "audio_file_base64" in error["message"]
    assert "surrogates" not in error["message"]
    raw = httpx.post(f"{scorer_url}/v1/score", content=wav, headers={"Content-Type": "audio/wav"}, timeout=60)
    assert raw.status_code == 415 and "base64-encoded in audio_file_base64" in raw.json()["error"]["message"]


def test_score_takes_a_file_upload_as_curl_F_sends_it(scorer_url: str, tmp_path: Path) -> None:
    # No base64 in a shell argument: the file as a form part, the text beside it (as the OpenAI route takes it).
    audio, rate = synth_speech(TEXT)
    (tmp_path / "speech.wav").write_bytes(base64.b64decode(encode_file(audio, rate)))
    for path in ("/v1/score", "/score"):
        done = subprocess.run(["curl", "-s", "-F", "file=@speech.wav", "-F", f"text={TEXT}", "-F", "language=en",
                               "-F", 'reward={"formula": "exp"}', "-F", "reference_duration_s=3",
                               "-F", "request_id=form-1", f"{scorer_url}{path}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60, check=True)
        answer = json.loads(done.stdout)
        assert answer["transcript"] == TEXT and answer["score"] == 1.0, answer
        assert answer["request_id"] == "form-1" and answer["expected_duration_source"] == "reference"
    wav = (tmp_path / "speech.wav").read_bytes()
    refusals = [
        ({"language": "en"}, "missing_field", "text", "the form has no 'text' field"),
        ({"text": TEXT, "colour": "red"}, "unknown_field", "colour", "the form field 'colour' is not known"),
        ({"text": TEXT, "reward": "exp"}, "invalid_request", "reward", "form field 'reward' must be a JSON value"),
    ]
    for data, code, field, says in refusals:
        r = httpx.post(f"{scorer_url}/v1/score", files={"file": ("speech.wav", wav)}, data=data, timeout=60)
        error = r.json()["error"]
        assert (r.status_code, error["code"], error["path"]) == (400, code, field), r.text
        assert error["message"].startswith(says)
    no_file = httpx.post(f"{scorer_url}/v1/score", data={"text": TEXT}, files={"x": ("x", b"")}, timeout=60)
    assert no_file.status_code == 400 and no_file.json()["error"]["path"] == "file"


def test_json_sent_the_way_curl_d_sends_it_still_scores(scorer_url: str) -> None:
    audio, rate = synth_speech(TEXT)
    body = json.dumps({"protocol_version": "1", "prompt": TEXT, "audio_file_base64": encode_file(audio, rate)})
    r = httpx.post(f"{scorer_url}/v1/score", content=body,
                   headers={"Content-Type": "application/x-www-form-urlencoded"}, timeout=60)
    assert r.status_code == 200 and r.json()["score"] >= 0.9


def test_binary_garbage_is_described_not_parsed(scorer_url: str) -> None:
    r = httpx.post(f"{scorer_url}/v1/score", content=b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
                   headers={"Content-Type": "application/json"}, timeout=60)
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "malformed_json"
    assert "not UTF-8 text" in error["message"] and "Portable Network Graphics" in error["message"]


@pytest.fixture(scope="module")
def base_only_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with audio-reward's base dependencies only (no server extra)."""
    root = tmp_path_factory.mktemp("base-venv")
    venv.EnvBuilder(with_pip=True).create(root)
    python = root / "bin" / "python"
    base = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *base], check=True, timeout=600)
    return python


@pytest.mark.parametrize(("flags", "needs"), [
    ([], "needs the 'server' extra (no module named 'fastapi'): run pip install -e '.[server]'"),
    (["--model", "base"], "needs the 'server' and 'base-model' extras (no module named 'fastapi'): "
                          "run pip install -e '.[server,base-model]'"),
])
def test_serve_without_its_extras_says_what_to_install(base_only_python: Path, flags: list[str], needs: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([str(base_only_python), "-m", "audio_reward.cli", "serve", *flags], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip() == f"audio-reward serve: {needs} in your audio-reward checkout"


def test_serve_with_every_extra_passes_the_extras_check() -> None:
    # The same check in the full environment: nothing is missing, so serve goes on to its settings.
    done = subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--model", "base", "--port", "-1"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "invalid settings" in done.stderr and "extra" not in done.stderr


def _serve(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **env}
    return subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--port", "0", *args], cwd=REPO_ROOT,
                          env=full, capture_output=True, text=True, timeout=120)


def test_serve_names_the_engines_extra_before_starting(tmp_path: Path) -> None:
    # The [server] environment has no torch and no transformers: the preset's engine needs them.
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules.update(torch=None, transformers=None)\n")
    done = _serve(["--preset", "seed-tts-eval-en"], {"PYTHONPATH": f"{hidden}{os.pathsep}{REPO_ROOT}"})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "audio-reward serve: needs the 'transformers' extra (no module named 'torch'): "
        "run pip install -e '.[transformers]' in your audio-reward checkout"]


@pytest.mark.parametrize(("flags", "repo"), [
    (["--preset", "seed-tts-eval-en", "--engine", "faster-whisper"], "Systran/faster-whisper-large-v3"),
    (["--engine", "transformers", "--model", "openai/whisper-tiny"], "openai/whisper-tiny"),
], ids=["faster-whisper", "transformers"])
@pytest.mark.parametrize("offline", ["no-hub", "HF_HUB_OFFLINE"])
def test_a_hub_model_with_no_local_copy_is_one_line(flags: list[str], repo: str, offline: str, dead_url: str,
                                                     tmp_path: Path) -> None:
    # An empty Hugging Face cache, and a hub that refuses connections (or offline mode): what a user's
    # machine without network sees.  One line saying how to provide the model, not the download's traceback.
    env = {"HF_HOME": str(tmp_path / "hf")}
    env |= {"HF_ENDPOINT": dead_url} if offline == "no-hub" else {"HF_HUB_OFFLINE": "1"}
    started = time.monotonic()
    done = _serve(flags, env)
    assert time.monotonic() - started < 30  # no retries with backoff before the answer
    assert done.returncode == 2 and done.stdout == "", done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("audio-reward serve: model ") and "is not available offline" in line
    assert f"hf download {repo}" in line and "--model /path/to/folder" in line and "AUDIO_REWARD_SERVER_MODEL" in line


def test_serve_on_a_port_another_server_holds_is_one_line_before_anything_loads() -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "serve", "--port", str(port)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120)
    # Not "listening on" followed by uvicorn's bind error and exit 3 once the model has loaded.
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip().splitlines() == [
        f"audio-reward serve: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another server holds it? pass --port)"
    ]


def _gpus_ctranslate2_sees() -> int:
    import ctranslate2

    return int(ctranslate2.get_cuda_device_count())


@pytest.mark.skipif(_gpus_ctranslate2_sees() > 0, reason="this machine has a GPU: --device cuda is usable here")
def test_serve_device_cuda_without_a_gpu_is_one_line_before_it_listens() -> None:
    done = _serve(["--device", "cuda"], {})
    # Not "listening on" followed by CTranslate2's traceback from the background load.
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.splitlines() == [
        "audio-reward serve: --device cuda: ctranslate2 (engine faster-whisper) sees no CUDA device on this machine "
        "(no GPU, or its driver is missing or too old); pass --device cpu, or --device auto to use a GPU where there "
        "is one"]


@pytest.mark.parametrize("model", ["/nonexistent", "./models/whisper-tiny", "~/no-such-model"])
def test_serve_with_a_model_folder_that_is_not_there_is_one_line_before_it_listens(model: str) -> None:
    done = _serve(["--model", model], {})
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.splitlines() == [
        f"audio-reward serve: model folder {model!r} does not exist (--model takes tiny.en, base, a hub id, "
        "or the folder of a model)"]


@pytest.mark.parametrize(("flags", "line"), [
    (["--preset", "bogus"], "invalid settings: unknown preset 'bogus'; available: fast-en, qwen3-asr, "
                            "seed-tts-eval-en, seed-tts-eval-zh"),
    (["--max-audio-seconds", "-1"], "invalid settings: --max-audio-seconds -1.0: input should be greater than 0"),
    (["--max-batch-size", "0", "--reward-formula", "square"],
     "invalid settings: --max-batch-size 0: input should be greater than or equal to 1"),
    (["--language", "xx"], "--language xx: model tiny.en is English-only; pass --language en (or none), "
                           "or a multilingual model (--model base)"),
], ids=["preset", "max-audio-seconds", "two-errors", "language"])
def test_bad_serve_settings_are_one_line_naming_the_flag(flags: list[str], line: str) -> None:
    done = _serve(flags, {})
    assert done.returncode == 2 and done.stdout == "", done.stdout
    [said] = done.stderr.splitlines()
    assert said.startswith(f"audio-reward serve: {line}"), said
    assert "pydantic" not in said and "type=" not in said


def test_an_unknown_serve_flag_shows_serves_usage() -> None:
    done = _serve(["--bogus-flag"], {})
    assert done.returncode == 2
    assert done.stderr.startswith("usage: audio-reward serve ")
    assert done.stderr.splitlines()[-1] == "audio-reward serve: error: unrecognized arguments: --bogus-flag"


def test_a_language_the_loaded_model_lacks_stops_the_server_with_one_line(tmp_path: Path) -> None:
    # The same English-only weights under a name that does not say so: found once the model has loaded.
    from audio_reward.scorer_server.engines.model_store import resolve_ctranslate2_model

    folder = tmp_path / "whisper-small-english"
    folder.symlink_to(resolve_ctranslate2_model("tiny.en").path)
    done = _serve(["--model", str(folder), "--language", "fr"], {})
    assert done.returncode == 1
    assert f"--language fr: model {folder} does not transcribe it (it supports: en)" in done.stderr
    assert "Traceback" not in done.stderr
