"""``compute_score`` with verl-omni's audio scorer signature, on cached clients.

It reads a rollout row (the plugin's one rollout reader, :mod:`.samples`), so it lives in the trainer plugin,
over the SDK: the scorer client knows nothing of rollouts and imports nothing of the plugin. What it keeps
between calls is the SDK's generic :class:`~audio_reward.scorer_client.client_cache.ClientCache`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from ..protocol.errors import validation_reasons
from ..scorer_client.client_cache import ClientCache
from ..scorer_client.settings import ClientSettings, url_error
from .samples import audio_sample_from_row

CLIENT_CACHE = ClientCache()
"""The clients and settings :func:`compute_score` reuses: per event loop and settings, bounded, closed when the
loop shuts down (see :class:`~audio_reward.scorer_client.client_cache.ClientCache`)."""


async def close_cached_clients() -> None:
    """Close the clients :func:`compute_score` opened on the running event loop.

    ``asyncio.run`` (and any loop shut down with ``loop.shutdown_asyncgens()``)
    calls it by itself before the loop closes; call it to close them sooner.
    """
    await CLIENT_CACHE.aclose()


def _build_settings(server_url: str, timeout: float, max_retries: int, retry_backoff: float,
                    api_key: str | None) -> ClientSettings:
    try:
        return ClientSettings(server_url, timeout=timeout, max_retries=max_retries, backoff=retry_backoff,
                              api_key=api_key or None)
    except ValidationError as exc:
        bad_url = url_error(exc)
        if bad_url is not None:
            raise bad_url from None
        # The client calls it backoff; name the argument the caller passed.
        reasons = [f"retry_{r}" if r.startswith("backoff") else r for r in validation_reasons(exc)]
        raise ValueError("compute_score: " + "; ".join(reasons)) from None


async def compute_score(
    solution_audio: tuple[Any, int] | None = None,
    ground_truth: str | None = None,
    extra_info: Mapping[str, Any] | None = None,
    data_source: str | None = None,
    *,
    server_url: str,
    timeout: float = 120.0,
    max_retries: int = 2,
    retry_backoff: float = 0.5,
    api_key: str | None = None,
) -> dict[str, Any]:
    """Score one rollout on the scorer at ``server_url``: ``{"score": ..., **diagnostics}``.

    Drop-in for verl-omni's ``audio_http_scorer_client.compute_score``:
    ``solution_audio`` is ``(waveform, sample_rate)`` (numpy, CPU torch
    tensor or list); when it is ``None``, ``extra_info["audio"]`` and
    ``extra_info["audio_sample_rate"]`` are used, where verl-omni's TTS
    rollout leaves them.  ``ground_truth`` is the target text.
    ``extra_info`` becomes the request metadata by the rule of
    :func:`~audio_reward.scorer_client.wire.sanitize_metadata` (finite JSON
    scalars kept, numpy/torch scalars unwrapped, the rest dropped);
    ``extra_info["language"]``, when a string, also sets the language.
    ``extra_info["speaker_reference_path"]``, when set, is the row's reference
    recording (a WAV or FLAC file): it is read and registered once per client
    (:meth:`~audio_reward.scorer_client.AsyncScorerClient.register_speaker`) and its id sent, so the answer
    holds ``speaker_similarity`` (and the speaker term, if the reward weighs it).
    The row is read by the plugin's one rollout reader,
    :func:`~audio_reward.trainer_plugin.samples.audio_sample_from_row`.

    One client (one connection pool) is kept per event loop and setting, so
    thousands of calls share connections.  ``api_key`` defaults to
    ``AUDIO_REWARD_CLIENT_API_KEY``, else ``AUDIO_REWARD_API_KEY`` (see
    :class:`~audio_reward.scorer_client.settings.ClientSettings`, which also
    bounds the numbers: a bad one raises ValueError naming it).  Failures raise
    :class:`~audio_reward.scorer_client.errors.ScorerError` subclasses.
    """
    # verl calls this once per sample: the settings are built (environment read, every validator) once per
    # arguments and AUDIO_REWARD_* environment, and the client once per loop and settings.
    args = (server_url, timeout, max_retries, retry_backoff, api_key)
    settings = CLIENT_CACHE.settings(args, lambda: _build_settings(*args))
    sample = audio_sample_from_row(solution_audio, ground_truth, extra_info)
    client = await CLIENT_CACHE.client(settings)
    speaker = await client.register_speaker_file(sample.speaker_reference) if sample.speaker_reference else None
    return (await client.score(sample.waveform, sample.sample_rate, sample.text, language=sample.language,
                               metadata=sample.metadata, speaker_reference_id=speaker)).to_dict()
