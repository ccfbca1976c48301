"""Transformers-format checkpoints, as the transformers and vLLM engines load them.

A packaged CTranslate2 name (``tiny.en``, ``base``) or a CTranslate2 folder is
converted once, exactly, into a transformers checkpoint in the cache
(:mod:`.convert`); a transformers folder or hub id is used as it is (a hub id
with no local copy and no hub to reach is one :class:`ModelNotAvailableError`).  Its
``model_type`` says which decoding the engine runs: Whisper or Qwen3-ASR.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from .convert import ct2_whisper_to_transformers, is_current_conversion
from .model_store import (
    PACKAGED_MODELS,
    ResolvedModel,
    cache_dir,
    ensure_hub_model,
    folder_or_hub_id,
    resolve_ctranslate2_model,
)

log = logging.getLogger(__name__)


class UnsupportedModelError(ValueError):
    """The checkpoint is neither Whisper nor Qwen3-ASR, or this transformers cannot run it."""


def resolve_transformers_checkpoint(name: str) -> ResolvedModel:
    """A transformers checkpoint for ``name``, converting CTranslate2 Whisper models on first use."""
    path = Path(name).expanduser()
    if name in PACKAGED_MODELS or (path.is_dir() and (path / "model.bin").exists()):
        ct2 = resolve_ctranslate2_model(name)
        key = ct2.sha256 or hashlib.sha256(Path(ct2.path).resolve().as_posix().encode()).hexdigest()
        target = cache_dir() / "transformers" / f"{Path(ct2.model_id).name}-{key[:16]}"
        if not is_current_conversion(target):
            log.info("converting CTranslate2 Whisper for transformers", extra={"model": name, "target": str(target)})
            ct2_whisper_to_transformers(ct2.path, target)
        return ResolvedModel(ct2.model_id, str(target), ct2.sha256)
    resolved = folder_or_hub_id(name, "config.json", "transformers checkpoint")
    if not path.is_dir():  # a hub id: in the cache, or the hub answers for it
        ensure_hub_model(name, name)
    return resolved


def checkpoint_architecture(path: str) -> str:
    """``whisper`` or ``qwen3_asr`` from the checkpoint's config."""
    local = Path(path) / "config.json"
    if local.exists():
        model_type = json.loads(local.read_text(encoding="utf-8")).get("model_type")
    else:
        from transformers import AutoConfig

        model_type = AutoConfig.from_pretrained(path).model_type
    if model_type not in ("whisper", "qwen3_asr"):
        raise UnsupportedModelError(f"{path}: model_type {model_type!r} is not Whisper or Qwen3-ASR")
    return str(model_type)


def default_dtype(device: str, architecture: str) -> str:
    """The weights' dtype when the compute type is ``default``: float32 on the CPU (vLLM's CPU kernels take it
    everywhere); on a GPU bfloat16 for Qwen3-ASR (trained in it), float16 for Whisper."""
    if device.startswith("cpu"):
        return "float32"
    return "bfloat16" if architecture == "qwen3_asr" else "float16"
