"""Regenerate the protocol conformance vectors in audio_reward/protocol/examples/.

Each vector is a JSON payload plus its expected outcome in manifest.json:
``{"file", "kind", "valid", "code"}`` where ``code`` is the first error code a
conforming receiver reports.  Audio is a deterministic 10 ms tone so the files
stay small.  The output is byte-for-byte reproducible (a test regenerates it
and compares).  Run: ``python scripts/make_protocol_examples.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from audio_reward.protocol import encode_f32, encode_file, encode_pcm16

OUT = Path(__file__).resolve().parent.parent / "audio_reward" / "protocol" / "examples"
RATE = 16_000
TONE = (0.25 * np.sin(2 * np.pi * 440 * np.arange(160) / RATE)).astype(np.float32)
TONE_ID = hashlib.sha256(TONE.astype("<f4").tobytes()).hexdigest()  # how a server names the tone as a reference


def verl_omni_request(**overrides: object) -> dict:
    """Built the way verl-omni's audio scorer client builds it."""
    payload = {
        "protocol_version": "1",
        "waveform_f32_base64": base64.b64encode(TONE.astype("<f4").tobytes()).decode("ascii"),
        "num_samples": int(TONE.shape[0]),
        "sample_rate": RATE,
        "prompt": "hello world",
        "metadata": {"index": 3, "data_source": "tts_train", "temperature": 0.9, "is_val": False, "speaker": None},
    }
    payload.update(overrides)
    return payload


def without_peak_chunk(wav_base64: str) -> str:
    """The WAV without its ``PEAK`` chunk: libsndfile stamps the current time into it, so every run differs."""
    raw = base64.b64decode(wav_base64)
    chunks, pos = [], 12
    while pos + 8 <= len(raw):
        cid, size = raw[pos:pos + 4], struct.unpack("<I", raw[pos + 4:pos + 8])[0]
        end = pos + 8 + size + (size & 1)
        if cid != b"PEAK":
            chunks.append(raw[pos:end])
        pos = end
    body = b"WAVE" + b"".join(chunks)
    return base64.b64encode(b"RIFF" + struct.pack("<I", len(body)) + body).decode("ascii")


def without(d: dict, *keys: str) -> dict:
    return {k: v for k, v in d.items() if k not in keys}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder to write (default {OUT})")
    out = parser.parse_args(argv).out
    base = verl_omni_request()
    audio_less = without(base, "waveform_f32_base64", "num_samples")
    cases: list[tuple[str, str, object, str | None]] = [
        ("valid/verl_omni_v1.json", "score_request", base, None),
        ("valid/pcm16.json", "score_request",
         dict(audio_less, waveform_pcm16_base64=encode_pcm16(TONE), num_samples=160), None),
        ("valid/wav_file.json", "score_request",
         dict(without(audio_less, "sample_rate"), audio_file_base64=without_peak_chunk(encode_file(TONE, RATE))), None),
        ("valid/flac_file.json", "score_request",
         dict(without(audio_less, "sample_rate"), audio_file_base64=encode_file(TONE, RATE, fmt="FLAC")), None),
        ("valid/extensions.json", "score_request",
         dict(base, language="en", request_id="req-42", reference_duration_s=0.01,
              reward={"formula": "exp", "exp_k": 2.5, "empty_transcript_penalty": 0.5}), None),
        ("valid/minor_version.json", "score_request", dict(base, protocol_version="1.1"), None),
        ("valid/empty_metadata.json", "score_request", without(base, "metadata"), None),
        ("valid/batch_request.json", "batch_request",
         {"protocol_version": "1", "items": [without(base, "protocol_version"), base]}, None),
        ("valid/score_response.json", "score_response",
         {"score": 0.97, "cer": 0.03, "wer": 0.0, "transcript": "Hello world.", "model": "tiny.en",
          "protocol_version": "1", "request_id": "req-42", "empty_transcript": False, "language": None}, None),
        ("valid/error.json", "error",
         {"error": {"code": "queue_full", "message": "the queue is full", "retryable": True}}, None),
        ("valid/batch_response.json", "batch_response", {"protocol_version": "1", "results": [
            {"score": 1.0, "cer": 0.0},
            {"error": {"code": "empty_audio", "message": "$.items[1].waveform_f32_base64: holds no samples",
                       "retryable": False}}]}, None),
        ("valid/speaker_reference_id.json", "score_request",
         dict(base, speaker_reference_id=TONE_ID,
              reward={"speaker_weight": 0.3, "quality_weight": 0.2, "speaker_floor": 0.25}), None),
        ("valid/speaker_reference_inline.json", "score_request",
         dict(base, speaker_reference_audio_base64=encode_file(TONE, RATE, fmt="FLAC")), None),
        ("valid/measure_quality.json", "score_request", dict(base, measure_quality=True), None),
        ("invalid/measure_quality_not_bool.json", "score_request", dict(base, measure_quality="yes"),
         "invalid_request"),
        ("valid/signals_response.json", "score_response",
         {"score": 0.75, "cer": 0.1, "reward_asr": 0.9, "speaker_similarity": 0.6, "reward_speaker": 0.6,
          "speaker_reference_id": TONE_ID, "dnsmos_ovrl": 3.4, "dnsmos_sig": 3.7, "dnsmos_bak": 4.1,
          "dnsmos_p808": 3.9, "reward_quality": 0.6}, None),
        ("valid/speaker_request.json", "speaker_request",
         {"protocol_version": "1", "audio_file_base64": encode_file(TONE, RATE, fmt="FLAC")}, None),
        ("valid/speaker_request_f32.json", "speaker_request",
         {"protocol_version": "1", "waveform_f32_base64": encode_f32(TONE), "sample_rate": RATE, "num_samples": 160},
         None),
        ("valid/speaker_response.json", "speaker_response",
         {"speaker_reference_id": TONE_ID, "protocol_version": "1", "duration_s": 3.2, "model": "resemblyzer",
          "ttl_s": 3600.0}, None),
        ("invalid/speaker_reference_id_malformed.json", "score_request",
         dict(base, speaker_reference_id="speaker-7"), "invalid_speaker_reference"),
        ("invalid/speaker_reference_both.json", "score_request",
         dict(base, speaker_reference_id=TONE_ID, speaker_reference_audio_base64=encode_file(TONE, RATE, fmt="FLAC")),
         "invalid_speaker_reference"),
        ("invalid/speaker_reference_not_audio.json", "score_request",
         dict(base, speaker_reference_audio_base64=base64.b64encode(b"not audio").decode()), "invalid_audio_file"),
        ("invalid/speaker_request_no_audio.json", "speaker_request", {"protocol_version": "1"},
         "invalid_audio_encoding"),
        ("invalid/speaker_request_prompt.json", "speaker_request",
         {"protocol_version": "1", "audio_file_base64": encode_file(TONE, RATE, fmt="FLAC"), "prompt": "hi"},
         "unknown_field"),
        ("invalid/unsupported_version.json", "score_request", dict(base, protocol_version="2"),
         "unsupported_protocol_version"),
        ("invalid/version_not_string.json", "score_request", dict(base, protocol_version=1),
         "unsupported_protocol_version"),
        ("invalid/bad_base64.json", "score_request", dict(base, waveform_f32_base64="AAAA*AAA"), "invalid_base64"),
        ("invalid/truncated_base64.json", "score_request",
         dict(base, waveform_f32_base64=base["waveform_f32_base64"][:-3]), "invalid_base64"),
        ("invalid/partial_sample.json", "score_request",
         dict(base, waveform_f32_base64=base64.b64encode(b"\0" * 6).decode(), num_samples=1), "invalid_audio_length"),
        ("invalid/num_samples_mismatch.json", "score_request", dict(base, num_samples=161), "num_samples_mismatch"),
        ("invalid/non_finite_samples.json", "score_request",
         dict(base, waveform_f32_base64=encode_f32(np.array([0.0, np.nan, np.inf], np.float32)), num_samples=3),
         "non_finite_audio"),
        ("invalid/empty_audio.json", "score_request", dict(base, waveform_f32_base64="", num_samples=0), "empty_audio"),
        ("invalid/sample_rate_zero.json", "score_request", dict(base, sample_rate=0), "invalid_sample_rate"),
        ("invalid/sample_rate_10mhz.json", "score_request", dict(base, sample_rate=10_000_000), "invalid_sample_rate"),
        ("invalid/sample_rate_float.json", "score_request", dict(base, sample_rate=16000.5), "invalid_sample_rate"),
        ("invalid/sample_rate_string.json", "score_request", dict(base, sample_rate="16000"), "invalid_sample_rate"),
        ("invalid/too_long.json", "score_request",
         dict(audio_less, sample_rate=1000, waveform_pcm16_base64=encode_pcm16(np.zeros(61_000, np.float32))),
         "audio_too_long"),
        ("invalid/metadata_nested.json", "score_request", dict(base, metadata={"tags": ["a", "b"]}),
         "invalid_metadata"),
        ("invalid/metadata_not_object.json", "score_request", dict(base, metadata=[1, 2]), "invalid_metadata"),
        ("invalid/prompt_not_string.json", "score_request", dict(base, prompt=["hello"]), "invalid_prompt"),
        ("invalid/missing_prompt.json", "score_request", without(base, "prompt"), "missing_field"),
        ("invalid/missing_sample_rate.json", "score_request", without(base, "sample_rate"), "missing_field"),
        ("invalid/unknown_field.json", "score_request", dict(base, waveform_url="http://example.com/a.wav"),
         "unknown_field"),
        ("invalid/two_encodings.json", "score_request", dict(base, waveform_pcm16_base64=encode_pcm16(TONE)),
         "invalid_audio_encoding"),
        ("invalid/no_encoding.json", "score_request", audio_less, "invalid_audio_encoding"),
        ("invalid/not_an_object.json", "score_request", [base], "invalid_request"),
        ("invalid/bad_reward_options.json", "score_request", dict(base, reward={"formula": "square"}),
         "invalid_reward_options"),
        ("invalid/batch_empty.json", "batch_request", {"protocol_version": "1", "items": []}, "invalid_request"),
        ("invalid/batch_bad_item.json", "batch_request",
         {"protocol_version": "1", "items": [base, dict(base, sample_rate=0)]}, "invalid_sample_rate"),
        ("invalid/response_nested.json", "score_response", {"score": 0.5, "details": {"cer": 0.5}}, "invalid_request"),
        ("invalid/response_missing_score.json", "score_response", {"cer": 0.5}, "missing_field"),
        ("invalid/error_missing_retryable.json", "error", {"error": {"code": "x", "message": "y"}}, "missing_field"),
    ]
    manifest = []
    for name, kind, payload, code in cases:
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1) + "\n")
        manifest.append({"file": name, "kind": kind, "valid": code is None, "code": code})
    # Python's json writes NaN literals; verl-omni's client uses json, so receivers must name the field.
    nan_meta = out / "invalid/metadata_nan.json"
    nan_meta.write_text(json.dumps(dict(base, metadata={"temperature": float("nan")}), indent=1) + "\n")
    manifest.append(
        {"file": "invalid/metadata_nan.json", "kind": "score_request", "valid": False, "code": "invalid_metadata"}
    )
    nan_score = out / "invalid/response_nan_score.json"
    nan_score.write_text(json.dumps({"score": float("nan")}) + "\n")
    manifest.append(
        {"file": "invalid/response_nan_score.json", "kind": "score_response", "valid": False, "code": "invalid_request"}
    )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
