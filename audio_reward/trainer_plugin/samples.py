"""The one reader of a rollout's fields: what the reward needs from a rollout, as an :class:`AudioSample`.

Rollouts carry audio in different places depending on the stack: verl-omni's
TTS agent loop puts ``audio`` / ``audio_sample_rate`` in the agent loop's extra
fields (which land in ``non_tensor_batch``), other loops in the tensor batch,
``tool_extra_fields`` or ``extra_info``.  :func:`audio_sample_from_item` looks
in all of them, in that order; :func:`audio_sample_from_row` reads the
arguments of verl-omni's ``compute_score``.  Both read the row's
``extra_info`` (language, speaker reference, metadata) the same way and
validate what they find.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..scorer_client.errors import InvalidInputError
from ..scorer_client.wire import check_sample_rate, check_waveform, sanitize_metadata

SPEAKER_REFERENCE_KEY = "speaker_reference_path"
"""The ``extra_info`` key of a row's reference recording (a WAV or FLAC path)."""
AUDIO_KEYS = ("audio", "audio_sample_rate")
"""Where verl-omni's TTS rollout leaves the waveform and its rate (never sent as metadata)."""


class SampleError(InvalidInputError):
    """A rollout's audio cannot be scored (empty, non-finite, not mono): a per-sample failure."""


class MissingFieldError(SampleError):
    """The batch lacks a field the reward needs: a configuration error, never masked."""


@dataclass(frozen=True)
class AudioSample:
    """One rollout's speech and the text it should say."""

    waveform: np.ndarray
    sample_rate: int
    text: str
    language: str | None = None
    metadata: dict[str, str | int | float | bool | None] = field(default_factory=dict)
    sample_id: str = ""
    uid: str | None = None
    """The GRPO group id, when the batch has one."""
    speaker_reference: str | None = None
    """The row's reference recording of the voice (``extra_info["speaker_reference_path"]``), when it names one."""


def _unwrap(value: Any) -> Any:
    return value.item() if isinstance(value, np.ndarray) and value.shape == () else value


def _as_mapping(value: Any, name: str) -> dict[str, Any]:
    value = _unwrap(value)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SampleError(f"{name} must be a mapping, got {type(value).__name__}")
    return dict(value)


def as_waveform(audio: Any) -> np.ndarray:
    """Mono float32 samples from a tensor/array/list with leading singleton dims; rejects empty or non-finite."""
    if hasattr(audio, "detach"):
        audio = audio.detach().float()  # bf16 tensors have no numpy view
    while getattr(audio, "ndim", 1) > 1 and audio.shape[0] == 1:
        audio = audio[0]
    try:
        return check_waveform(audio, "audio")
    except InvalidInputError as exc:
        raise SampleError(str(exc)) from exc


def as_sample_rate(value: Any) -> int:
    """A sample rate the scorer accepts, in Hz, from an int, float, 0-d/1-element array or tensor."""
    try:
        return check_sample_rate(value)
    except InvalidInputError as exc:
        raise SampleError(str(exc)) from exc


def target_text(non_tensor: Mapping[str, Any], extra_info: Mapping[str, Any], text_key: str | None = None) -> str:
    """The text the speech should say: ``reward_model.ground_truth``, else ``extra_info[text_key or 'text']``."""
    reward_model = _as_mapping(non_tensor.get("reward_model"), "reward_model")
    for source, key in ((extra_info, text_key), (reward_model, "ground_truth"), (extra_info, "ground_truth"),
                        (extra_info, "text")):
        value = _unwrap(source.get(key)) if key is not None else None
        if isinstance(value, str) and value.strip():
            return value
    raise MissingFieldError("no target text: expected reward_model.ground_truth or extra_info['text']")


def find_field(item: Any, extra_info: Mapping[str, Any], key: str) -> Any:
    """``key`` from the tensor batch, ``non_tensor_batch``, ``tool_extra_fields`` or ``extra_info``, first found."""
    tensors = getattr(item, "batch", None)
    if tensors is not None and key in tensors:
        return tensors[key]
    non_tensor = item.non_tensor_batch
    if key in non_tensor and _unwrap(non_tensor[key]) is not None:
        return non_tensor[key]
    tool = _as_mapping(non_tensor.get("tool_extra_fields"), "tool_extra_fields")
    if tool.get(key) is not None:
        return tool[key]
    return extra_info.get(key)


def _read(extra_info: Mapping[str, Any], audio: Any, rate: Any, text: str, omit: tuple[str, ...] = AUDIO_KEYS,
          sample_id: str = "", uid: str | None = None) -> AudioSample:
    language = _unwrap(extra_info.get("language"))
    reference = _unwrap(extra_info.get(SPEAKER_REFERENCE_KEY))
    return AudioSample(as_waveform(audio), as_sample_rate(rate), text,
                       language if isinstance(language, str) and language else None,
                       sanitize_metadata({k: v for k, v in extra_info.items() if k not in omit}),
                       sample_id, uid, str(reference) if reference else None)


def audio_sample_from_item(
    item: Any, *, audio_key: str = "audio", sample_rate_key: str = "audio_sample_rate", text_key: str | None = None,
) -> AudioSample:
    """Build an :class:`AudioSample` from one ``DataProtoItem``; :class:`SampleError` names what is missing."""
    non_tensor = item.non_tensor_batch
    extra_info = _as_mapping(non_tensor.get("extra_info"), "extra_info")
    audio = find_field(item, extra_info, audio_key)
    if audio is None:
        raise MissingFieldError(
            f"no audio: expected {audio_key!r} in the batch, non_tensor_batch, tool_extra_fields or extra_info "
            "(is the rollout an audio-producing one, e.g. verl-omni's TTS agent loop?)"
        )
    rate = find_field(item, extra_info, sample_rate_key)
    if rate is None:
        raise MissingFieldError(f"no sample rate: expected {sample_rate_key!r} beside the audio")
    return _read(extra_info, audio, rate, target_text(non_tensor, extra_info, text_key),
                 (audio_key, sample_rate_key), sample_label(item), group_uid(item))


def audio_sample_from_row(solution_audio: Any, ground_truth: str | None,
                          extra_info: Mapping[str, Any] | None) -> AudioSample:
    """Build an :class:`AudioSample` from verl-omni's ``compute_score`` arguments.

    ``solution_audio`` is ``(waveform, sample_rate)``; when it is ``None``, ``extra_info["audio"]`` and
    ``extra_info["audio_sample_rate"]`` are used, where verl-omni's TTS rollout leaves them.
    """
    info = _as_mapping(extra_info, "extra_info")
    if solution_audio is None and all(key in info for key in AUDIO_KEYS):
        solution_audio = tuple(info[key] for key in AUDIO_KEYS)
    if not isinstance(solution_audio, (tuple, list)) or len(solution_audio) != 2:
        raise SampleError("compute_score expects solution_audio=(waveform, sample_rate)")
    waveform, rate = solution_audio
    return _read(info, waveform, rate, "" if ground_truth is None else str(ground_truth))


def group_uid(item: Any) -> str | None:
    """The GRPO group ``uid`` of one ``DataProtoItem`` (None when the batch has none)."""
    uid = _unwrap(item.non_tensor_batch.get("uid"))
    return None if uid in (None, "") else str(uid)


def _extra_info_as_sent(item: Any) -> Mapping[str, Any]:
    """An item's ``extra_info`` for naming a sample that failed: empty when it is not a mapping."""
    return info if isinstance(info := _unwrap(item.non_tensor_batch.get("extra_info")), Mapping) else {}


def failed_sample_text(item: Any, text_key: str | None = None) -> str:
    """The target text of an item whose sample could not be read, for its failure message ('' when none)."""
    try:
        return target_text(item.non_tensor_batch, _extra_info_as_sent(item), text_key)
    except SampleError:
        return ""


def sample_label(item: Any) -> str:
    """A name for error messages: ``extra_info.index`` (or ``id``) and the GRPO group ``uid``."""
    extra_info = _extra_info_as_sent(item)
    parts = {"index": _unwrap(extra_info.get("index", extra_info.get("id", ""))), "uid": group_uid(item)}
    return " ".join(f"{k}={v}" for k, v in parts.items() if v not in ("", None)) or "<unnamed sample>"
