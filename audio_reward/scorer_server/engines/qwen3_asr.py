"""Qwen3-ASR's languages, shared by the transformers and vLLM engines.

Qwen3-ASR names languages in full in its prompt and its reply (``language
English<asr_text>...``); the server speaks ISO 639-1 codes.  Both directions
read one table, transformers' own (its Qwen3-ASR processor, transformers >=
5.24), else vLLM's Whisper table, which spells the same names.  Neither
library is imported until a language is first looked up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from functools import cache

LANGUAGE_PREFIX_TOKENS = 8
"""What a detected-language reply (``language English<asr_text>``) costs before the text, in tokens."""


@cache
def language_table() -> Mapping[str, str]:
    """ISO 639-1 code -> the English name Qwen3-ASR uses; empty when neither library is installed."""
    with contextlib.suppress(ImportError):
        from transformers.models.qwen3_asr import processing_qwen3_asr

        table: Mapping[str, str] | None = getattr(processing_qwen3_asr, "LANGUAGE_CODE_TO_NAME", None)
        if table:
            return table
    try:
        from vllm.model_executor.models import whisper_utils
    except ImportError:
        return {}
    vllm_table: Mapping[str, str] = whisper_utils.ISO639_1_SUPPORTED_LANGS
    return vllm_table


def language_name(code: str) -> str:
    """``en`` -> ``English``, as Qwen3-ASR's prompt spells languages; full names pass through.

    Raises ValueError for a language the table does not have.
    """
    name = language_table().get(code.lower())
    if name is not None:
        return str(name)
    if code.lower() in _codes_by_name():  # a full name, any case
        return code[:1].upper() + code[1:].lower()
    raise ValueError(f"Qwen3-ASR does not support language {code!r}")


def language_code(name: str | None) -> str | None:
    """``English`` -> ``en`` (Qwen3-ASR names languages in full); unknown names pass through."""
    if not name:
        return None
    return _codes_by_name().get(name.strip().lower(), name.strip())


@cache
def _codes_by_name() -> Mapping[str, str]:
    # Built once: a detected language is looked up for every auto-language transcript.
    return {v.lower(): k for k, v in language_table().items()}
