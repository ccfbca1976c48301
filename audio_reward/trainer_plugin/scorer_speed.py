"""How long the scorer takes for one training step, estimated before the launch.

A GRPO step sends the scorer ``prompts × group size`` clips of up to the rollout's longest audio.  The
scorer's ``GET /v1/info`` says where it runs (``engine.device``) and how fast it has transcribed
(``throughput.audio_seconds_per_second``, measured on the requests it served).  A fresh scorer has served
none, so the pre-flight then measures it: it scores the packaged example speech (3 s, synthetic, the
sentence of ``examples/speech.txt``) repeated to the step's clip length, once alone and then as one
batch of as many clips as fit the probe's time budget, and reads the scorer's own measure back.  Speech,
not noise: Whisper decodes nothing from noise and would look faster than it is on real rollouts.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import numpy as np

from .recipes.overrides import GROUP_SIZE, PIPELINE_NAME, TTS_OVERRIDES
from .settings import lookup

PROBE_BUDGET_VARIABLE = "AUDIO_REWARD_PREFLIGHT_PROBE_S"
"""Seconds the pre-flight may spend measuring a scorer that has measured nothing yet; 0 reads /v1/info only."""
PROBE_BUDGET_S = 60.0
PROBE_DEFAULT_CLIP_S = 10.0
"""Probe clip length when the config does not say how long its audio gets."""
TTS_CODEC_HZ = 12.5
"""Qwen3-TTS codec-0 frames per second: ``data.max_response_length`` frames are this many times fewer seconds."""
_PROBE_CLIP = "probe_speech.flac"
_PROBE_TEXT = "The quick brown fox jumps over the lazy dog."
_PROBE_GAP_S = 0.25


@dataclass(frozen=True)
class StepLoad:
    """What one training step asks of the scorer: ``clips`` clips of at most ``max_audio_s`` seconds each."""

    prompts: int
    group_size: int
    max_audio_s: float | None
    """None where the config does not say (only the Qwen3-TTS pipeline's length is known: frames / 12.5 Hz)."""

    @property
    def clips(self) -> int:
        return self.prompts * self.group_size

    @property
    def audio_s(self) -> float | None:
        """The step's audio at its longest; None when the clip length is not known."""
        return None if self.max_audio_s is None else self.clips * self.max_audio_s

    def describe(self) -> str:
        clips = f"{self.prompts} prompts × {self.group_size} = {self.clips} clips"
        return f"{clips} of up to {self.max_audio_s:.1f} s" if self.max_audio_s is not None else clips


def step_load(config: Any) -> StepLoad | None:
    """The step's scoring load from verl's ``data.train_batch_size``, ``rollout.n`` and, for Qwen3-TTS,
    ``data.max_response_length``; None for a config without a training batch."""
    prompts = lookup(config, "data.train_batch_size")
    if prompts is None:
        return None
    group = int(lookup(config, GROUP_SIZE, 1))
    frames = lookup(config, "data.max_response_length")
    tts = str(lookup(config, PIPELINE_NAME, "")) == TTS_OVERRIDES.value(PIPELINE_NAME)
    seconds = int(frames) / TTS_CODEC_HZ if frames and tts else None
    return StepLoad(int(prompts), group, seconds)


def trainer_on_gpu(config: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the trainer runs on GPUs: verl's ``trainer.device`` (cuda by default), unless audio-reward's CPU
    mode is on (``VERL_PLATFORM=cpu``, which keeps ``trainer.device`` as it is)."""
    environ = os.environ if environ is None else environ
    return (environ.get("VERL_PLATFORM", "").lower() != "cpu"
            and not str(lookup(config, "trainer.device", "cuda")).startswith("cpu"))


def measured_rate(info: Mapping[str, Any]) -> tuple[float, int] | None:
    """``(audio seconds per second, utterances)`` from a ``/v1/info`` answer; None before it measured any."""
    throughput = info.get("throughput")
    if not isinstance(throughput, Mapping):
        return None
    rate = throughput.get("audio_seconds_per_second")
    if not isinstance(rate, (int, float)) or rate <= 0:
        return None
    return float(rate), int(throughput.get("utterances") or 0)


def probe_clip(seconds: float) -> tuple[np.ndarray, int, str]:
    """``(waveform, sample_rate, text)``: the packaged example speech repeated to ``seconds``, and its text."""
    import soundfile as sf

    with resources.files(__package__).joinpath(_PROBE_CLIP).open("rb") as f:
        speech, rate = sf.read(f, dtype="float32")
    once = np.concatenate([speech, np.zeros(int(_PROBE_GAP_S * rate), dtype=np.float32)])
    samples = max(1, int(seconds * rate))
    # the text: a sentence for each the clip starts, the last one maybe cut short
    return np.resize(once, samples), int(rate), " ".join([_PROBE_TEXT] * math.ceil(samples / len(once)))


def _score_probe(url: str, clips: int, seconds: float, timeout: float) -> float:
    """Score ``clips`` probe clips of ``seconds`` as one batch; their audio seconds per wall second."""
    from ..scorer_client import ScorerClient, ScorerError

    waveform, rate, text = probe_clip(seconds)
    with ScorerClient(url, timeout=timeout, max_retries=1) as client:
        started = time.monotonic()
        results = client.score_many([(waveform, rate, text)] * clips, chunk_size=clips, concurrency=1)
        elapsed = time.monotonic() - started
    if failed := [r for r in results if isinstance(r, ScorerError)]:
        raise RuntimeError(f"{len(failed)} of {clips} probe clips failed: {failed[0]}")
    return clips * len(waveform) / rate / max(elapsed, 1e-6)


@dataclass(frozen=True)
class ScorerSpeed:
    """Where a scorer runs and how fast it transcribes, with how that was learnt."""

    url: str
    device: str
    engine: str
    model: str
    audio_s_per_s: float | None
    how: str

    def describe(self) -> str:
        rate = f"{self.audio_s_per_s:.2f} audio s/s" if self.audio_s_per_s else "throughput unknown"
        return f"{self.url}: {self.engine} ({self.model}) on {self.device}, {rate} ({self.how})"


def measure(url: str, info: Mapping[str, Any], load: StepLoad | None, *, budget_s: float,
            info_fn: Callable[[str], dict[str, Any]]) -> ScorerSpeed:
    """The scorer's speed: from ``/v1/info`` when it has measured it, else from a probe of at most about
    ``budget_s`` seconds (none when 0), then ``/v1/info`` read again (its busy-time measure of the probe).

    Raises RuntimeError when the probe's clips cannot be scored.
    """
    engine: Mapping[str, Any] = info["engine"] if isinstance(info.get("engine"), Mapping) else {}
    speed = ScorerSpeed(url, str(engine.get("device") or "unknown device"), str(engine.get("name") or "?"),
                        str(engine.get("model_id") or "?"), None, "")
    known = measured_rate(info)
    if known is not None:
        return replace(speed, audio_s_per_s=known[0], how=f"measured on the {known[1]} utterances it has served")
    if budget_s <= 0:
        return replace(speed, how=f"not measured yet; {PROBE_BUDGET_VARIABLE}=0 skips the probe")
    limits: Mapping[str, Any] = info["limits"] if isinstance(info.get("limits"), Mapping) else {}
    longest = float(limits.get("max_audio_seconds") or PROBE_DEFAULT_CLIP_S)
    seconds = min(load.max_audio_s if load and load.max_audio_s else PROBE_DEFAULT_CLIP_S, longest)
    started = time.monotonic()
    rate = _score_probe(url, 1, seconds, timeout=max(120.0, 4 * budget_s))
    one_s = time.monotonic() - started
    batching: Mapping[str, Any] = info["batching"] if isinstance(info.get("batching"), Mapping) else {}
    batch = min(load.clips if load else 8, int(batching.get("max_batch_size") or 1), int(budget_s // one_s))
    clips = 1
    if batch >= 2:  # the step's clips arrive together: measure a batch, which a GPU runs at a higher rate
        rate, clips = _score_probe(url, batch, seconds, timeout=max(120.0, 4 * budget_s)), 1 + batch
    served = measured_rate(info_fn(url))  # the scorer's own measure (engine busy time) over the probe
    how = f"measured by a probe of {clips} clips of {seconds:.1f} s of speech"
    return replace(speed, audio_s_per_s=served[0] if served is not None else rate, how=how)


def probe_budget(environ: Mapping[str, str] | None = None) -> float:
    """``AUDIO_REWARD_PREFLIGHT_PROBE_S`` (seconds, 0 for no probe), else 60; ValueError naming it when bad."""
    raw = (os.environ if environ is None else environ).get(PROBE_BUDGET_VARIABLE, "").strip()
    if not raw:
        return PROBE_BUDGET_S
    with contextlib.suppress(ValueError):  # not a number: refused below, as a negative or infinite value is
        value = float(raw)
        if math.isfinite(value) and value >= 0:
            return value
    raise ValueError(f"{PROBE_BUDGET_VARIABLE}={raw!r}: give seconds (0: no probe)")


def step_estimate(load: StepLoad | None, rate: float | None) -> str:
    """``a step's 32 clips of up to 28.8 s (921.6 audio s) take about 26 s to score``, or what is missing."""
    if load is None:
        return "no training batch in the config to estimate a step from"
    if load.audio_s is None:
        return f"a step sends {load.describe()} (their length is not known from this config)"
    if rate is None:
        return f"a step sends {load.describe()} ({load.audio_s:.0f} audio s); no throughput to divide it by"
    return (f"a step's {load.describe()} ({load.audio_s:.0f} audio s) take about {load.audio_s / rate:.0f} s to "
            "score at that rate")
