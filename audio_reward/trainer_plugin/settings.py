"""Settings of the verl plugin: one typed object from the trainer config and ``AUDIO_REWARD_TRAINER_*``.

The plugin reads the ``reward.audio_reward`` block of the verl config (add it
with ``+reward.audio_reward.server_url=...`` when the recipe configs are not
used).  The block holds the plugin's own keys and, flat beside them, any
:class:`~audio_reward.scorer_client.ClientSettings` field (``timeout``,
``max_retries``, ``deadline``, ``concurrency``...; the URL(s) under
``server_url``), which go to the client settings the plugin settings
contain.  Values missing there come from ``AUDIO_REWARD_TRAINER_<KEY>``
variables for the plugin's keys and from the client's own variables
(``AUDIO_REWARD_CLIENT_<FIELD>``, the shared ``AUDIO_REWARD_URL`` and
``AUDIO_REWARD_API_KEY``) for the client's, then from the defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError, field_serializer, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ..environment import URL_ENV, masked
from ..protocol import RewardOptions
from ..protocol.errors import validation_reasons
from ..scorer_client.settings import ClientSettings, split_commas, trainer_waits, url_in_environment

CONFIG_BLOCK = "audio_reward"
"""Key of the plugin's block under ``reward`` in the verl config."""
ENV_PREFIX = "AUDIO_REWARD_TRAINER_"
URL_KEY = "server_url"
"""The block's name for the client's ``urls``."""
_CLIENT_KEYS = frozenset(ClientSettings.model_fields) - {"urls"}
"""Client fields a block may set by their own name (its URLs go under ``server_url``)."""
NO_URL = f"no scorer URL: set reward.{CONFIG_BLOCK}.{URL_KEY} (or {URL_ENV})"
"""The one line a config that names no scorer URL fails with (settings and pre-flight check alike)."""


Names = Annotated[tuple[str, ...], NoDecode, BeforeValidator(split_commas)]
"""A list of names: a sequence, or one comma-separated string (as an environment variable gives it)."""


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, (str, tuple, list)) and not value)


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
    if hasattr(value, "items"):  # a Mapping or a DictConfig
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ListConfig":
        return [_to_plain(v) for v in value]
    return value


class PluginSettings(BaseSettings):
    """How :class:`AudioScoreRewardManager` reaches the scorer and what it does with answers.

    ``client`` holds the connection (URLs, key, timeouts, retries, batch
    concurrency); keyword arguments named like a client field (and
    ``server_url`` for its URLs) are given to it, so
    ``PluginSettings(server_url=url, timeout=5)`` works as the config block does.
    """

    # An exported but empty variable (KEY=) means unset, as in a shell.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True,
                                      env_ignore_empty=True)

    client: ClientSettings = Field(description="The scorer connection: the client's settings.")
    failure_policy: FailurePolicy = Field(FailurePolicy.RAISE,
                                          description="raise or mask (docs/training.md section 7).")
    coalesce_window_ms: float = Field(5.0, ge=0, description="Samples arriving within this window go out as one batch.")
    max_batch: int = Field(64, ge=1, description="Most samples in one batch request.")
    audio_key: str = Field("audio", description="Where the rollout leaves the waveform.")
    sample_rate_key: str = Field("audio_sample_rate", description="Where the rollout leaves the sample rate.")
    text_key: str | None = Field(None, description="extra_info key of the target text when ground_truth is not it.")
    language: str | None = Field(None, description="Language sent when the row names none.")
    diagnostics: Names = Field(
        ("cer", "wer", "duration_s", "duration_ratio"),
        description="Numeric diagnostics copied into reward_extra_info (env: comma separated).")
    reward: RewardOptions | None = Field(
        None, description="Per-request reward options (docs/protocol.md); unset ones take the server's policy.")
    validation_dir: str | None = Field(None, description="Where validation audio and reports go.")
    validation_max_wavs: int = Field(4, ge=0, description="Validation WAVs kept per step.")
    validation_splits: Names = Field(
        ("val", "validation", "test"), description="Splits logged as validation (env: comma separated).")
    reference_audio: str | None = Field(
        None, description="The speaker prompt recording, copied into every validation step folder as reference.wav.")
    failure_log: str | None = Field(
        None,
        description="JSONL file where every failure under raise is recorded, for the fail-closed sampler's error.")

    @model_validator(mode="before")
    @classmethod
    def _client_from_flat_keys(cls, data: Any) -> Any:
        """Gather the client's fields (``server_url`` for its URLs) into one ``ClientSettings``.

        The client settings are built here, not by field validation, so they
        read their own environment variables for what is not given.
        """
        if not isinstance(data, dict) or isinstance(data.get("client"), ClientSettings):
            return data
        data = dict(data)
        given = dict(data.pop("client", None) or {})
        given.update({"urls" if k == URL_KEY else k: data.pop(k) for k in (_CLIENT_KEYS | {URL_KEY}) & set(data)})
        # An empty value in the block (server_url: "" from an unset shell variable) leaves the field to the environment.
        given = trainer_waits({k: v for k, v in given.items() if not _unset(v)})
        if "urls" not in given and not url_in_environment():
            raise ValueError(NO_URL)
        data["client"] = ClientSettings(**given)
        return data

    @field_validator("reward", mode="before")
    @classmethod
    def _empty_reward_is_unset(cls, value: Any) -> Any:
        # reward: {} in a config sends no options, as leaving the key out does.
        return None if isinstance(value, Mapping) and not value else value

    @field_serializer("reward")
    def _reward_as_sent(self, value: RewardOptions | None) -> dict[str, Any] | None:
        # Only the options set, as they go on the wire.
        return None if value is None else value.model_dump(mode="json", exclude_none=True)

    @field_validator("diagnostics")
    @classmethod
    def _not_score(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if "score_failed" in value or "score" in value:
            raise ValueError("diagnostics must not list 'score' or 'score_failed' (always reported)")
        return value

    @property
    def server_url(self) -> tuple[str, ...]:
        """The scorer URL(s) (the client's ``urls``)."""
        return self.client.urls

    @classmethod
    def from_config(cls, config: Any = None, *, stand_in_url: str | None = None) -> PluginSettings:
        """Build from a verl config (its ``reward.audio_reward`` block) over the environment.

        Raises ValueError with one line per problem.  ``stand_in_url`` is used
        when neither the block nor the environment names a URL, so a pre-flight
        check can still check the rest of the block.
        """
        block = block_of(config)
        if unknown := set(block) - (set(cls.model_fields) - {"client"}) - _CLIENT_KEYS - {URL_KEY}:
            raise ValueError(f"unknown keys in reward.{CONFIG_BLOCK}: {sorted(unknown)}")
        values = {k: v for k, v in block.items() if v is not None}
        if stand_in_url is not None and _unset(values.get(URL_KEY)) and not url_in_environment():
            values[URL_KEY] = stand_in_url
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ValueError("; ".join(validation_reasons(exc))) from None

    def masking_problem(self, config: Any) -> str | None:
        """Why ``failure_policy=mask`` cannot run under the verl ``config``'s advantage estimator; None if it can."""
        value = lookup(config, "algorithm.adv_estimator")
        estimator = None if value is None else str(getattr(value, "value", value))  # verl may give its enum
        if self.failure_policy is FailurePolicy.MASK and estimator not in MASKING_ESTIMATORS:
            return f"failure_policy=mask needs algorithm.adv_estimator in {list(MASKING_ESTIMATORS)}, got {estimator}"
        return None

    def describe(self) -> dict[str, Any]:
        """Plain values for the start-up log line, the API key masked."""
        client = self.client.model_dump(mode="json")
        client["api_key"] = masked(client.get("api_key"))
        return {**self.model_dump(mode="json", exclude={"client"}), "client": client}


def lookup(config: Any, dotted: str, default: Any = None) -> Any:
    """``config``'s value at the dotted key (a verl/OmegaConf tree or plain mappings); ``default`` where a key
    on the way is missing or the value is None."""
    node = config
    for part in dotted.split("."):
        if node is None or not hasattr(node, "get"):
            return default
        node = node.get(part)
    return default if node is None else node


def block_of(config: Any) -> dict[str, Any]:
    """The plain ``reward.audio_reward`` mapping of a verl config (empty when absent)."""
    return _to_plain(lookup(config, f"reward.{CONFIG_BLOCK}")) or {}
