"""The OpenAI-compatible transcription API, driven by the official ``openai`` SDK against a real server.

The server is a real ``audio-reward serve`` (uvicorn, Whisper tiny.en) on loopback; the speech is
real synthetic speech (hibari-tts), encoded as WAV, MP3, OGG, M4A (AAC) and WebM (Opus).
"""

from __future__ import annotations

import base64
import io
import json
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile as sf

from tests.testkit.server import REPO_ROOT, free_port, running_server
from tests.testkit.speech import ffmpeg_bytes, synth_speech, tone

TEXT = "The quick brown fox jumps over the lazy dog."
API_KEY = "openai-test-key-0123456789"


def wav_bytes(audio: np.ndarray, rate: int, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, audio, rate, format=fmt, subtype=subtype)
    return buf.getvalue()


@pytest.fixture(scope="module")
def speech_wav() -> bytes:
    audio, rate = synth_speech(TEXT)
    return wav_bytes(audio, rate)


@pytest.fixture(scope="module")
def client(scorer_url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{scorer_url}/v1", api_key="unused", max_retries=0, timeout=120) as c:
        yield c


def test_sdk_transcribes_json_text_and_verbose_json(client: openai.OpenAI, speech_wav: bytes) -> None:
    plain = client.audio.transcriptions.create(model="tiny.en", file=("speech.wav", speech_wav))
    assert plain.text == TEXT
    assert plain.usage is not None and plain.usage.type == "duration"
    assert plain.usage.seconds == pytest.approx(sf.info(io.BytesIO(speech_wav)).duration, abs=0.01)

    text = client.audio.transcriptions.create(model="tiny.en", file=("speech.wav", speech_wav), response_format="text")
    assert isinstance(text, str) and text == TEXT

    verbose = client.audio.transcriptions.create(model="tiny.en", file=("speech.wav", speech_wav),
                                                 response_format="verbose_json", language="en", temperature=0,
                                                 prompt="a pangram")
    assert verbose.text == TEXT and verbose.language == "en"
    assert verbose.duration == pytest.approx(plain.usage.seconds)


FORMATS: list[tuple[str, Callable[[np.ndarray, int], bytes]]] = [
    ("speech.flac", lambda a, r: wav_bytes(a, r, "FLAC")),
    ("speech.mp3", lambda a, r: wav_bytes(a, r, "MP3")),
    ("speech.ogg", lambda a, r: wav_bytes(a, r, "OGG")),
    ("speech.m4a", lambda a, r: ffmpeg_bytes(a, r, "ipod", "aac", 16_000)),
    ("speech.webm", lambda a, r: ffmpeg_bytes(a, r, "webm", "libopus", 48_000)),
]
"""Files libsndfile reads, then containers only FFmpeg reads: both file endpoints take all of them."""


@pytest.mark.parametrize(("name", "encode"), FORMATS)
def test_compressed_formats_transcribe(client: openai.OpenAI, name: str,
                                       encode: Callable[[np.ndarray, int], bytes]) -> None:
    audio, rate = synth_speech(TEXT)
    result = client.audio.transcriptions.create(model="tiny.en", file=(name, encode(audio, rate)))
    assert result.text == TEXT


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny.en"]
    assert models.data[0].object == "model" and models.data[0].owned_by == "audio-reward"
    assert client.models.retrieve("tiny.en").id == "tiny.en"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("whisper-1")
    assert info.value.code == "model_not_found"


@pytest.mark.parametrize(
    ("kwargs", "error", "code", "param", "says"),
    [
        ({"model": "whisper-1"}, openai.NotFoundError, "model_not_found", "model", "serves tiny.en"),
        (
            {"model": "tiny.en", "temperature": 0.4},
            openai.BadRequestError,
            "unsupported_temperature",
            "temperature",
            "send 0",
        ),
        (
            {"model": "tiny.en", "language": "zh"},
            openai.BadRequestError,
            "unsupported_language",
            "language",
            "supports: en",
        ),
        ({"model": "tiny.en", "stream": True}, openai.BadRequestError, "unsupported_stream", "stream", "stream=false"),
        (
            {"model": "tiny.en", "response_format": "srt"},
            openai.BadRequestError,
            "invalid_request",
            "response_format",
            "'json', 'text' or 'verbose_json'",
        ),
    ],
)
def test_refusals_use_openai_error_shape(
    client: openai.OpenAI,
    speech_wav: bytes,
    kwargs: dict[str, object],
    error: type[openai.APIStatusError],
    code: str,
    param: str,
    says: str,
) -> None:
    with pytest.raises(error) as info:
        client.audio.transcriptions.create(file=("speech.wav", speech_wav), **kwargs)  # type: ignore[call-overload]
    exc = info.value
    assert exc.code == code and exc.param == param
    assert says in exc.message
    body = exc.response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == "invalid_request_error"


def test_non_audio_upload_names_its_format(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="tiny.en", file=("notes.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"))
    assert info.value.code == "invalid_audio_file" and info.value.param == "file"
    assert "notes.pdf" in info.value.message and "Portable Document Format" in info.value.message
    assert "<_io" not in info.value.message and "BytesIO" not in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="tiny.en", file=("notes.txt", b"remember the milk\n" * 10))
    assert "looks like text" in info.value.message


def test_form_mistakes_are_named(scorer_url: str, speech_wav: bytes) -> None:
    url = f"{scorer_url}/v1/audio/transcriptions"
    no_model = httpx.post(url, files={"file": ("speech.wav", speech_wav)}, timeout=60)
    assert no_model.status_code == 400
    assert no_model.json()["error"] == {
        "message": "the form field 'model' is required",
        "type": "invalid_request_error",
        "param": "model",
        "code": "missing_field",
    }
    no_file = httpx.post(url, data={"model": "tiny.en"}, files={"other": ("x", b"x")}, timeout=60)
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"
    as_json = httpx.post(url, json={"model": "tiny.en", "file": "speech.wav"}, timeout=60)
    assert as_json.status_code == 415
    assert "multipart/form-data" in as_json.json()["error"]["message"]


def test_unsupported_openai_fields_are_refused_by_name(client: openai.OpenAI, speech_wav: bytes) -> None:
    # A client asking for word timings or logprobs must learn it gets none, not a silent 200 without them.
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(
            model="tiny.en",
            file=("speech.wav", speech_wav),
            response_format="verbose_json",
            timestamp_granularities=["word"],
        )
    assert info.value.code == "unsupported_field" and info.value.param == "timestamp_granularities[]"
    assert "timings" in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="tiny.en", file=("speech.wav", speech_wav), include=["logprobs"])  # type: ignore[list-item]
    assert info.value.code == "unsupported_field" and "logprobs" in info.value.message


def test_broken_multipart_and_unknown_routes_answer_in_openai_shape(scorer_url: str, speech_wav: bytes) -> None:
    url = f"{scorer_url}/v1/audio/transcriptions"
    two_files = httpx.post(
        url,
        data={"model": "tiny.en"},
        files=[("file", ("a.wav", speech_wav)), ("file", ("b.wav", speech_wav))],
        timeout=60,
    )
    assert two_files.status_code == 400
    assert two_files.json()["error"]["code"] == "malformed_multipart"
    garbage = httpx.post(
        url, content=b"garbage", headers={"content-type": "multipart/form-data; boundary=zzz"}, timeout=60
    )
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == "malformed_multipart"
    for response, status in (
        (httpx.get(url, timeout=60), 405),
        (httpx.post(f"{scorer_url}/v1/audio/translations", timeout=60), 404),
    ):
        assert response.status_code == status
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}


def _flac_bytes(seconds: float, rate: int, channels: int = 1, *, unknown_length: bool = False) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.repeat(tone(seconds, rate=rate)[:, None], channels, axis=1), rate, format="FLAC", subtype="PCM_16")
    raw = bytearray(buf.getvalue())
    if unknown_length:  # STREAMINFO total_samples = 0, as streaming encoders write it
        raw[8 + 13] &= 0xF0
        raw[8 + 14 : 8 + 18] = b"\0\0\0\0"
    return bytes(raw)


def test_uploads_are_bounded_before_decoding(client: openai.OpenAI) -> None:
    # A FLAC that declares no length is decoded as a stream, not refused for an absurd duration.
    short = client.audio.transcriptions.create(
        model="tiny.en",
        response_format="verbose_json",
        file=("stream.flac", _flac_bytes(5, 24_000, unknown_length=True)),
    )
    assert short.duration == pytest.approx(5.0, abs=1e-3)
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(
            model="tiny.en", file=("long.flac", _flac_bytes(600, 16_000, unknown_length=True))
        )
    assert info.value.code == "audio_too_long" and "no declared length" in info.value.message
    # 59 s of 192 kHz stereo is under the duration limit but 90 MB once decoded: refused from its header.
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.transcriptions.create(model="tiny.en", file=("wide.flac", _flac_bytes(59, 192_000, 2)))
    assert info.value.code == "audio_too_large" and "max_audio_bytes" in info.value.message


def test_transcriptions_share_metrics_with_scoring(client: openai.OpenAI, scorer_url: str, speech_wav: bytes) -> None:
    client.audio.transcriptions.create(model="tiny.en", file=("speech.wav", speech_wav))
    metrics = httpx.get(f"{scorer_url}/metrics", timeout=10).text
    assert 'audio_reward_transcriptions_total{outcome="ok"}' in metrics
    assert 'audio_reward_requests_total{endpoint="/v1/audio/transcriptions",status="200"}' in metrics
    assert 'audio_reward_request_latency_seconds_count{endpoint="/v1/audio/transcriptions"}' in metrics
    batches = [line for line in metrics.splitlines() if line.startswith("audio_reward_batch_size_count")]
    assert batches and float(batches[0].split()[-1]) >= 1


@pytest.fixture(scope="module")
def guarded_url() -> Iterator[str]:
    """A server with an API key, a short audio limit, a small body limit and a served model name."""
    with running_server(
        model="tiny.en",
        max_audio_seconds=2,
        max_body_bytes=200_000,
        served_model_name="openai/whisper-large-v3",
        env={"AUDIO_REWARD_API_KEY": API_KEY},
    ) as server:
        yield server.url


def test_same_auth_and_limits_as_score(guarded_url: str) -> None:
    short, rate = synth_speech("Hello there.")
    short_wav = wav_bytes(short[: int(1.5 * rate)], rate)
    with openai.OpenAI(base_url=f"{guarded_url}/v1", api_key="wrong-key", max_retries=0) as bad:
        with pytest.raises(openai.AuthenticationError) as info:
            bad.audio.transcriptions.create(model="openai/whisper-large-v3", file=("s.wav", short_wav))
        assert info.value.code == "unauthorized" and info.value.body is not None
        with pytest.raises(openai.AuthenticationError):
            bad.models.list()
    with openai.OpenAI(base_url=f"{guarded_url}/v1", api_key=API_KEY, max_retries=0, timeout=120) as good:
        assert [m.id for m in good.models.list().data] == ["openai/whisper-large-v3"]
        ok = good.audio.transcriptions.create(model="openai/whisper-large-v3", file=("s.wav", short_wav))
        assert ok.text.strip()
        long_audio, long_rate = synth_speech(TEXT)  # about 3 s: over the 2 s limit
        with pytest.raises(openai.BadRequestError) as info:
            good.audio.transcriptions.create(
                model="openai/whisper-large-v3", file=("long.flac", wav_bytes(long_audio, long_rate, "FLAC"))
            )
        assert info.value.code == "audio_too_long" and "limit is 2 s" in info.value.message
        with pytest.raises(openai.APIStatusError) as too_big:
            good.audio.transcriptions.create(
                model="openai/whisper-large-v3", file=("big.wav", wav_bytes(long_audio, long_rate, subtype="FLOAT"))
            )
        assert too_big.value.status_code == 413 and too_big.value.code == "payload_too_large"


def _section_blocks(markdown: str, heading: str) -> list[tuple[str, str]]:
    """(language, code) of each fenced block under ``heading`` in ``markdown``."""
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    parts = section.split("```")
    return [(block.split("\n", 1)[0].strip(), block.split("\n", 1)[1]) for block in parts[1::2]]


def test_docs_replacing_vllm_serve_run_as_written(tmp_path: Path) -> None:
    blocks = _section_blocks((REPO_ROOT / "docs" / "server.md").read_text(), "OpenAI-compatible transcription API")
    serve = next(code for lang, code in blocks if lang == "bash" and "audio-reward serve" in code).strip()
    python = next(code for lang, code in blocks if lang == "python")
    curl = next(code for lang, code in blocks if lang == "bash" and code.startswith("curl")).strip()
    audio, rate = synth_speech(TEXT)
    (tmp_path / "speech.wav").write_bytes(wav_bytes(audio, rate))
    port = free_port()
    args = [*shlex.split(serve)[2:], "--port", str(port)]  # "audio-reward serve" + the documented flags
    with running_server(**_flags_to_settings(args)) as server:
        done = subprocess.run(
            [sys.executable, "-c", python.replace("127.0.0.1:8000", f"127.0.0.1:{port}")],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == TEXT
        shown = subprocess.run(
            shlex.split(curl.replace("localhost:8000", f"127.0.0.1:{port}")),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert json.loads(shown.stdout)["text"] == TEXT
        assert server.url.endswith(str(port))
        # Every served name is listed, the first one first, and OpenAI clients sending the alias work too.
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=120) as sdk:
            assert [m.id for m in sdk.models.list().data] == ["openai/whisper-large-v3", "whisper-1"]
            assert sdk.models.retrieve("whisper-1").id == "whisper-1"
            # Each alias names the model actually loaded, as vLLM's root does.
            listed = httpx.get(f"{server.url}/v1/models", timeout=30).json()["data"]
            assert [(m["root"], m["parent"]) for m in listed] == [("tiny.en", None)] * 2
            assert httpx.get(f"{server.url}/v1/models/whisper-1", timeout=30).json()["root"] == "tiny.en"
            sent = sdk.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav_bytes(audio, rate)))
            assert sent.text.strip() == TEXT
            with pytest.raises(openai.NotFoundError) as info:
                sdk.audio.transcriptions.create(model="tiny.en", file=("speech.wav", wav_bytes(audio, rate)))
            assert "serves openai/whisper-large-v3, whisper-1" in info.value.message


def _flags_to_settings(args: list[str]) -> dict[str, str | list[str]]:
    """``--flag value [value ...]`` pairs as settings; a flag followed by several values gives a list."""
    settings: dict[str, list[str]] = {}
    for arg in args:
        if arg.startswith("--"):
            current = settings.setdefault(arg.removeprefix("--").replace("-", "_"), [])
        else:
            current.append(arg)
    return {name: values[0] if len(values) == 1 else values for name, values in settings.items()}


@pytest.mark.parametrize(("name", "encode"), FORMATS)
def test_score_takes_every_format_the_transcription_endpoint_takes(scorer_url: str, name: str,
                                                                    encode: Callable[[np.ndarray, int], bytes]) -> None:
    audio, rate = synth_speech(TEXT)
    file_b64 = base64.b64encode(encode(audio, rate)).decode()
    single = httpx.post(f"{scorer_url}/v1/score", json={"protocol_version": "1", "prompt": TEXT,
                                                         "audio_file_base64": file_b64}, timeout=120)
    assert single.status_code == 200, single.text
    assert single.json()["transcript"] == TEXT and single.json()["score"] > 0.9
    batch = httpx.post(f"{scorer_url}/v1/score/batch", json={"protocol_version": "1", "items": [
        {"prompt": TEXT, "audio_file_base64": file_b64}]}, timeout=120)
    assert batch.json()["results"][0]["transcript"] == TEXT


@pytest.mark.parametrize(("name", "encode"), [FORMATS[1], FORMATS[3]], ids=["mp3", "m4a"])
def test_score_decodes_compressed_files_within_the_audio_limit(guarded_url: str, name: str,
                                                                encode: Callable[[np.ndarray, int], bytes]) -> None:
    # 8 s of tone against a 2 s limit: refused in seconds, naming the field the user sent.
    long_file = base64.b64encode(encode(tone(8.0), 16_000)).decode()
    r = httpx.post(f"{guarded_url}/v1/score", json={"protocol_version": "1", "prompt": TEXT,
                                                     "audio_file_base64": long_file},
                   headers={"X-API-Key": API_KEY}, timeout=120)
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "audio_too_long", r.text
    assert error["path"] == "$.audio_file_base64" and "the limit is 2 s" in error["message"]


def test_score_names_every_accepted_format_for_a_file_that_is_not_audio(scorer_url: str) -> None:
    r = httpx.post(f"{scorer_url}/v1/score", json={"protocol_version": "1", "prompt": TEXT,
                                                   "audio_file_base64": base64.b64encode(b"just notes\n" * 9).decode()},
                   timeout=60)
    error = r.json()["error"]
    assert r.status_code == 400 and error["code"] == "invalid_audio_file"
    assert "looks like text" in error["message"] and "MP3, OGG, M4A, WebM" in error["message"]
