"""Qwen3-ASR's language names: one table for both directions, vLLM's names when transformers has none."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from audio_reward.scorer_server.engines import qwen3_asr


@pytest.fixture(autouse=True)
def fresh_table() -> Iterator[None]:
    qwen3_asr.language_table.cache_clear()
    yield
    qwen3_asr.language_table.cache_clear()


def test_codes_and_names_map_both_ways() -> None:
    pytest.importorskip("transformers.models.qwen3_asr", reason="needs the 'transformers' extra (Qwen3-ASR is in 5.24)")
    table = qwen3_asr.language_table()
    assert table["en"] == "English"
    assert all(qwen3_asr.language_code(qwen3_asr.language_name(code)) == code for code in table)
    assert qwen3_asr.language_name("chinese") == "Chinese"  # a full name passes through
    assert qwen3_asr.language_code(" Klingon ") == "Klingon"  # an unknown detected name passes through
    assert qwen3_asr.language_code(None) is None
    with pytest.raises(ValueError, match="does not support language 'klingon'"):
        qwen3_asr.language_name("klingon")


def test_without_transformers_qwen3_asr_vllms_table_serves_both_directions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers.models.qwen3_asr", None)  # an older transformers
    models = types.ModuleType("vllm.model_executor.models")
    models.whisper_utils = types.SimpleNamespace(  # type: ignore[attr-defined]
        ISO639_1_SUPPORTED_LANGS={"en": "English", "zh": "Chinese"})
    for name in ("vllm", "vllm.model_executor"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.model_executor.models", models)
    assert qwen3_asr.language_name("zh") == "Chinese"
    assert qwen3_asr.language_code("Chinese") == "zh"
