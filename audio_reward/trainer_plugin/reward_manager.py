"""``AudioScoreRewardManager``: verl's reward-loop manager for speech rollouts.

Register it by installing audio-reward (its ``verl.plugins`` entry point
imports :mod:`audio_reward.trainer_plugin` in every verl process) and select
it with ``reward.reward_manager.name=audio_score``, or load it explicitly::

    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://audio_reward.trainer_plugin.reward_manager
    reward.reward_manager.name=AudioScoreRewardManager

Settings live under ``reward.audio_reward`` (see :mod:`.settings`).

The module imports without verl: :class:`AudioScoreRewardMixin` is the
manager's behaviour, and ``AudioScoreRewardManager`` (the mixin over verl's
``RewardManagerBase``) is built when first asked for, raising
:class:`~._verl.VerlUnavailableError` where verl is missing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from ..scorer_client.client_cache import ClientCache
from ._verl import reward_manager_base
from .remote_scorer import AudioRewardScorer, record_failure
from .samples import MissingFieldError, SampleError, audio_sample_from_item, failed_sample_text, group_uid, sample_label
from .settings import PluginSettings
from .validation_log import ValidationLogger

logger = logging.getLogger(__name__)

REGISTERED_NAME = "audio_score"
"""Name of the manager in verl's reward-manager registry."""


def _step(data: Any) -> int | None:
    for value in (data.meta_info.get("global_steps"), data.non_tensor_batch.get("global_steps")):
        if value is not None:
            return int(value[0] if hasattr(value, "__len__") and not isinstance(value, str) else value)
    return None


class AudioScoreRewardMixin:
    """Scores each rollout's waveform against its target text on the audio-reward server.

    Concurrent ``run_single`` calls (verl awaits a whole batch at once) are
    coalesced into batch requests.  Every result has the same
    ``reward_extra_info`` keys: the configured diagnostics (``cer``, ``wer``,
    ``duration_s``, ``duration_ratio`` by default; NaN when the server did not
    report one) and ``score_failed``.

    ``compute_score`` is accepted for verl's constructor signature and unused:
    scoring goes through the scorer client.  The manager owns that client: one
    per event loop it runs in (a connection pool belongs to one loop), closed
    when that loop shuts down or by :meth:`aclose`.
    """

    # verl also passes reward_router_address and reward_model_tokenizer, for a reward model this manager never asks.
    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, **_: Any) -> None:
        super().__init__(config, tokenizer, compute_score)  # type: ignore[call-arg]  # verl's RewardManagerBase
        self.settings = PluginSettings.from_config(config)
        if masking := self.settings.masking_problem(config):
            raise ValueError(f"reward.audio_reward.{masking}: other estimators would treat a failed sample's reward as "
                             "a measurement")
        self._clients = ClientCache(max_clients=1)
        self._scorer: AudioRewardScorer | None = None
        self.validation = ValidationLogger(self.settings.validation_dir, self.settings.validation_max_wavs,
                                           self.settings.reference_audio) if self.settings.validation_dir else None
        self._warned_no_split = False
        logger.info("AudioScoreRewardManager settings: %s", self.settings.describe())

    async def scorer(self) -> AudioRewardScorer:
        """The scorer of the running event loop, over this manager's client for that loop."""
        client = await self._clients.client(self.settings.client)
        if self._scorer is None or self._scorer.client is not client:
            self._scorer = AudioRewardScorer(self.settings, client)
        return self._scorer

    async def aclose(self) -> None:
        """Close the running loop's client (the loop's shutdown closes it too)."""
        self._scorer = None
        await self._clients.aclose()

    async def run_single(self, data: Any) -> dict[str, Any]:
        if len(data) != 1:
            raise ValueError(f"{type(self).__name__}.run_single scores one sample, got a batch of {len(data)}")
        item, settings = data[0], self.settings
        scorer = await self.scorer()
        try:
            sample = audio_sample_from_item(item, audio_key=settings.audio_key,
                                            sample_rate_key=settings.sample_rate_key, text_key=settings.text_key)
        except MissingFieldError as exc:
            # A configuration error: never masked, always recorded for the fail-closed sampler.
            record_failure(settings.failure_log, sample_label(item), group_uid(item), str(exc))
            raise
        except SampleError as exc:
            return scorer.failed(sample_label(item), failed_sample_text(item, settings.text_key), exc,
                                 group_uid(item)).for_verl()
        reward = await scorer.score(sample)
        if self.validation is not None and self._is_validation(data, sample.metadata):
            target = sample.metadata.get("target_audio")  # the row's recording of the text, if any
            await asyncio.to_thread(
                self.validation.log_sample, str(sample.metadata.get("index", sample.metadata.get("id", sample.text))),
                waveform=sample.waveform, sample_rate=sample.sample_rate, text=sample.text, score=reward.score,
                diagnostics={**reward.diagnostics, **reward.extra_info}, step=_step(data),
                target_audio=str(target) if target else None,
            )
        return reward.for_verl()

    def _is_validation(self, data: Any, metadata: dict[str, Any]) -> bool:
        if bool(data.meta_info.get("validate")):
            return True
        if "split" not in metadata and not self._warned_no_split:
            # verl gives per-sample rewards no validate flag: such a row, if it is a validation row, writes nothing.
            self._warned_no_split = True
            logger.warning("sample %s has no extra_info.split: the validation artifacts in %s are written only for "
                           "rows whose split is one of %s (the recipes' prepare_data writes it); validation rows "
                           "without it are scored and leave no audio and no metrics.json",
                           metadata.get("index", "?"), self.settings.validation_dir,
                           list(self.settings.validation_splits))
        return metadata.get("split") in self.settings.validation_splits


@functools.cache
def manager_class() -> type:
    """``AudioScoreRewardManager``: the mixin over verl's ``RewardManagerBase``, built once.

    Raises :class:`~._verl.VerlUnavailableError` (an ``ImportError``) when
    verl, or its reward-loop API, cannot be imported.
    """
    return type("AudioScoreRewardManager", (AudioScoreRewardMixin, reward_manager_base()), {
        "__module__": __name__, "__qualname__": "AudioScoreRewardManager", "__doc__": AudioScoreRewardMixin.__doc__,
    })


def __getattr__(name: str) -> Any:
    # verl loads the manager by name (pkg://...reward_manager + AudioScoreRewardManager), so the name
    # resolves here, and pickling by reference finds the same class (manager_class builds it once).
    if name == "AudioScoreRewardManager":
        return manager_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
