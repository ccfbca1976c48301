"""``/metrics`` and ``/v1/info`` as an operator reads them, from a real server."""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from audio_reward.protocol import encode_f32
from tests.testkit.server import running_server
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."


def _families(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _samples(families: dict[str, Any], name: str) -> list[Any]:
    return list(families[name].samples)


def _buckets(families: dict[str, Any], name: str) -> dict[tuple[str, str | None], float]:
    return {(s.name, s.labels.get("le")): s.value for s in families[name].samples}


def test_metrics_have_process_build_in_flight_and_histograms(scorer_url: str) -> None:
    audio, rate = synth_speech(TEXT)
    body = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "sample_rate": rate, "prompt": TEXT}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        scoring = pool.submit(httpx.post, f"{scorer_url}/v1/score", json=body, timeout=60)
        in_flight_seen = 0.0
        while not scoring.done():
            page = httpx.get(f"{scorer_url}/metrics", timeout=10).text
            for line in page.splitlines():
                if line.startswith("audio_reward_requests_in_flight "):
                    in_flight_seen = max(in_flight_seen, float(line.split()[-1]))
            time.sleep(0.05)
        assert scoring.result().status_code == 200
    assert in_flight_seen >= 1  # the scoring request, seen while it was served
    text = httpx.get(f"{scorer_url}/metrics", timeout=10).text
    assert "_created" not in text
    families = _families(text)
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "python_info", "python_gc_objects_collected"):
        assert name in families, name
    assert _samples(families, "audio_reward_build_info")[0].labels == {
        "version": "0.1.0", "engine": "faster-whisper", "model": "tiny.en"}
    assert _samples(families, "audio_reward_requests_in_flight")[0].value == 0
    for name in ("audio_reward_score", "audio_reward_cer", "audio_reward_batch_size",
                 "audio_reward_batch_audio_seconds"):
        assert families[name].type == "histogram", name
    score = _buckets(families, "audio_reward_score")
    assert score[("audio_reward_score_count", None)] >= 1
    assert score[("audio_reward_score_bucket", "0.9")] < score[("audio_reward_score_bucket", "1.0")]  # one > 0.9
    assert _buckets(families, "audio_reward_cer")[("audio_reward_cer_bucket", "0.1")] >= 1
    seconds = _buckets(families, "audio_reward_batch_audio_seconds")
    assert seconds[("audio_reward_batch_audio_seconds_sum", None)] >= len(audio) / rate * 0.99

def test_info_and_start_up_log_explain_the_effective_batch_size() -> None:
    with running_server(ready_timeout_s=120, model="tiny.en", max_batch_size=8, log_level="info",
                        engine_option="batched=false") as server:
        batching = httpx.get(f"{server.url}/v1/info", timeout=10).json()["batching"]
        log = server.log_path.read_text()
    assert batching["max_batch_size"] == 1 and batching["max_batch_size_setting"] == 8
    assert batching["engine_batches"] is False
    assert "max_batch_size 8 is not used" in batching["note"] and "one utterance per call" in batching["note"]
    # The operator chose 8, so the start-up log warns with the same words.
    assert f"WARNING audio_reward.scorer_server.app: {batching['note']}" in log
    assert "max_batch_size=1" in log
    assert "\x1b[" not in log  # not a terminal: no ANSI colour codes, uvicorn's lines included
    assert "Uvicorn running on" in log and "color_message" not in log
