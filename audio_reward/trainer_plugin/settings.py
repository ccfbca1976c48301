"""Settings of the verl plugin: one typed object from the trainer config and ``AUDIO_REWARD_*``.

The plugin reads the ``reward.audio_reward`` block of the verl config (add it
with ``+reward.audio_reward.server_url=...`` when the recipe configs are not
used).  Values missing there come from ``AUDIO_REWARD_<FIELD>`` environment
variables (``AUDIO_REWARD_URL`` for the server URL(s), comma separated), then
from the defaults below.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, Mapping

CONFIG_BLOCK = "audio_reward"
"""Key of the plugin's block under ``reward`` in the verl config."""


class FailurePolicy(str, Enum):
    """What a sample whose scoring failed becomes.

    ``raise``: the step stops with an error naming the sample.
    ``mask``: the sample gets ``score_failed=1`` and a NaN reward, which the
    ``grpo_masked`` advantage estimator keeps out of its group's statistics and
    out of the loss (its ``response_mask`` row is zeroed).
    """

    RAISE = "raise"
    MASK = "mask"


MASKING_ESTIMATORS = ("grpo_masked",)
"""Advantage estimators that understand masked (NaN) rewards; ``mask`` needs one of them."""


def _to_plain(value: Any) -> Any:
    """OmegaConf containers → plain dicts/lists, without importing omegaconf."""
    if hasattr(value, "items") and not isinstance(value, Mapping):
        value = dict(value.items())
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_to_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class PluginSettings:
    """How :class:`AudioScoreRewardManager` reaches the scorer and what it does with answers."""

    server_url: tuple[str, ...] = ()
    failure_policy: FailurePolicy = FailurePolicy.RAISE
    timeout: float = 120.0
    max_retries: int = 3
    deadline: float | None = None
    concurrency: int = 4
    coalesce_window_ms: float = 5.0
    max_batch: int = 64
    audio_key: str = "audio"
    sample_rate_key: str = "audio_sample_rate"
    text_key: str | None = None
    language: str | None = None
    diagnostics: tuple[str, ...] = ("cer", "wer", "duration_s", "duration_ratio")
    reward: Mapping[str, Any] = field(default_factory=dict)
    validation_dir: str | None = None
    validation_max_wavs: int = 4
    validation_splits: tuple[str, ...] = ("val", "validation", "test")
    reference_audio: str | None = None
    """The speaker prompt recording, copied into every validation step folder as ``reference.wav``."""
    failure_log: str | None = None
    """JSONL file where every failure under ``raise`` is recorded, for the fail-closed sampler's error."""

    def __post_init__(self) -> None:
        urls = self.server_url
        if isinstance(urls, str):
            urls = tuple(u.strip() for u in urls.split(",") if u.strip())
        object.__setattr__(self, "server_url", tuple(urls))
        try:
            object.__setattr__(self, "failure_policy", FailurePolicy(self.failure_policy))
        except ValueError:
            raise ValueError(
                f"failure_policy must be one of {[p.value for p in FailurePolicy]}, got {self.failure_policy!r}"
            ) from None
        object.__setattr__(self, "diagnostics", tuple(self.diagnostics))
        object.__setattr__(self, "validation_splits", tuple(self.validation_splits))
        object.__setattr__(self, "reward", dict(self.reward or {}))
        if "score_failed" in self.diagnostics or "score" in self.diagnostics:
            raise ValueError("diagnostics must not list 'score' or 'score_failed' (always reported)")
        if self.coalesce_window_ms < 0:
            raise ValueError(f"coalesce_window_ms must be >= 0, got {self.coalesce_window_ms}")
        for name in ("max_batch", "concurrency"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.validation_max_wavs < 0:
            raise ValueError(f"validation_max_wavs must be >= 0, got {self.validation_max_wavs}")

    @classmethod
    def from_config(cls, config: Any = None, env: Mapping[str, str] | None = None) -> "PluginSettings":
        """Build from a verl config (its ``reward.audio_reward`` block) over ``AUDIO_REWARD_*`` variables."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = "URL" if f.name == "server_url" else f.name.upper()
            raw = env.get(f"AUDIO_REWARD_{name}")
            if raw is None or raw == "" or f.name == "reward":
                continue
            if f.name in ("max_retries", "concurrency", "max_batch", "validation_max_wavs"):
                values[f.name] = int(raw)
            elif f.name in ("timeout", "deadline", "coalesce_window_ms"):
                values[f.name] = float(raw)
            elif f.name in ("diagnostics", "validation_splits"):
                values[f.name] = tuple(d.strip() for d in raw.split(",") if d.strip())
            else:
                values[f.name] = raw
        block = block_of(config)
        unknown = set(block) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown keys in reward.{CONFIG_BLOCK}: {sorted(unknown)}")
        values.update({k: v for k, v in block.items() if v is not None})
        if isinstance(values.get("server_url"), list):
            values["server_url"] = tuple(values["server_url"])
        return cls(**values)

    def describe(self) -> dict[str, Any]:
        """Plain values, for the start-up log line."""
        out = asdict(self)
        out["failure_policy"] = self.failure_policy.value
        return out


def block_of(config: Any) -> dict[str, Any]:
    """The plain ``reward.audio_reward`` mapping of a verl config (empty when absent)."""
    if config is None:
        return {}
    reward = config.get("reward") if hasattr(config, "get") else None
    block = reward.get(CONFIG_BLOCK) if reward is not None and hasattr(reward, "get") else None
    return _to_plain(block) or {}
