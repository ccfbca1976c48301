"""Pre-flight against a real scorer on loopback: its device, engine and throughput, and a step's scoring time.

The scorer is ``audio-reward serve`` with its default device (``auto``, which is the CPU on a machine without
a GPU) behind the TTS recipe's batch (4 prompts × 8 of up to 28.8 s) on a trainer that runs on GPUs: the
pre-flight warns, with the estimate.
"""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from audio_reward.trainer_plugin import preflight
from audio_reward.trainer_plugin.recipes.overrides import TTS_MAX_FRAMES
from tests.testkit.server import running_server, server_python


def _auto_device() -> str:
    """What ``--device auto`` picks for faster-whisper in the server's environment."""
    code = "from audio_reward.scorer_server.devices import pick_device; print(pick_device('faster-whisper', 'auto'))"
    return subprocess.run([server_python(), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


needs_cpu_only = pytest.mark.skipif("device='cpu'" not in _auto_device(),
                                    reason="the server's CTranslate2 sees a GPU here: auto picks cuda")


def tts_config(url: str, **trainer: object) -> dict[str, object]:
    return {
        "reward": {"reward_manager": {"name": "audio_score"}, "audio_reward": {"server_url": url}},
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"train_batch_size": 4, "max_response_length": TTS_MAX_FRAMES},
        "actor_rollout_ref": {"rollout": {"n": 8, "engine_kwargs": {"vllm_omni": {"pipeline_name": "qwen3_tts_rl"}}}},
        "trainer": trainer,
    }


def info(url: str) -> dict[str, object]:
    answer: dict[str, object] = httpx.get(f"{url}/v1/info", timeout=10).json()
    return answer


ESTIMATE = re.compile(r"a step's 4 prompts × 8 = 32 clips of up to 28\.8 s \(922 audio s\) take about (\d+) s "
                      r"to score at that rate")


@needs_cpu_only
def test_a_cpu_scorer_for_a_gpu_run_is_a_warning_with_the_step_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERL_PLATFORM", raising=False)
    with running_server(model="tiny.en", max_wait_ms=5) as server:
        before = info(server.url)
        engine = before["engine"]
        assert isinstance(engine, dict) and engine["device"] == "cpu"  # what auto picks where there is no GPU
        assert "device cpu (auto: ctranslate2 sees no CUDA device)" in server.log_tail()
        assert before["throughput"] == {"audio_seconds_per_second": None, "audio_seconds": 0.0,
                                        "busy_seconds": 0.0, "utterances": 0}

        scorer, speed = preflight.check_server(tts_config(server.url), probe_s=6)
        assert scorer.ok and not scorer.warning
        # A fresh scorer has measured nothing: the probe scores speech clips as long as the step's longest,
        # and the scorer's own measure of them is read back.
        after = info(server.url)["throughput"]
        assert isinstance(after, dict) and after["utterances"] >= 2 and after["audio_seconds"] >= 2 * 28.8 - 0.1
        rate = after["audio_seconds_per_second"]
        assert speed.ok and speed.warning and speed.status == "WARN"
        assert speed.message.startswith(f"{server.url}: faster-whisper (tiny.en) on cpu, {rate:.2f} audio s/s "
                                        f"(measured by a probe of {after['utterances']} clips of 28.8 s of speech); ")
        found = ESTIMATE.search(speed.message)
        assert found is not None, speed.message
        assert int(found.group(1)) == round(32 * 28.8 / rate)
        assert speed.message.endswith("The scorer runs on the CPU and the trainer on GPUs: restart it on a GPU of "
                                      "its own (audio-reward serve --device cuda)")

        # Measured once, read from /v1/info after: no second probe.
        _, again = preflight.check_server(tts_config(server.url), probe_s=6)
        assert f"measured on the {after['utterances']} utterances it has served" in again.message
        assert info(server.url)["throughput"]["utterances"] == after["utterances"]  # type: ignore[index]

        # The same scorer behind a trainer on the CPU (audio-reward's CPU mode) is no warning.
        monkeypatch.setenv("VERL_PLATFORM", "cpu")
        _, cpu_run = preflight.check_server(tts_config(server.url), probe_s=6)
        assert cpu_run.ok and not cpu_run.warning and ESTIMATE.search(cpu_run.message)


@needs_cpu_only
def test_without_a_probe_a_fresh_scorer_reports_its_device_and_no_estimate() -> None:
    with running_server(model="tiny.en", max_wait_ms=5) as server:
        _, speed = preflight.check_server(tts_config(server.url, device="cpu"), probe_s=0)
    assert speed.ok and not speed.warning
    assert speed.message == (
        f"{server.url}: faster-whisper (tiny.en) on cpu, throughput unknown (not measured yet; "
        "AUDIO_REWARD_PREFLIGHT_PROBE_S=0 skips the probe); a step sends 4 prompts × 8 = 32 clips of up to 28.8 s "
        "(922 audio s); no throughput to divide it by")
