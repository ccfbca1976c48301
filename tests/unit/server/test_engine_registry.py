"""The engine registry: a missing backend is an error that names the engine and the extra to install."""

from __future__ import annotations

import sys
from importlib.metadata import metadata
from pathlib import Path

import pytest

from audio_reward.extras import missing_extra_message
from audio_reward.scorer_server.engines import registry
from audio_reward.scorer_server.engines.registry import ENGINE_EXTRAS, ENGINES, EngineConfig, create_engine


def test_every_engine_names_an_extra_that_the_distribution_declares() -> None:
    extras = set(metadata("audio-reward").get_all("Provides-Extra") or [])
    assert set(ENGINE_EXTRAS) == set(ENGINES)
    assert {name: extra for name, extra in ENGINE_EXTRAS.items() if extra not in extras} == {}


def test_a_missing_backend_names_the_engine_and_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "engine_without_backend.py").write_text("import backend_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "engine_without_backend", raising=False)
    monkeypatch.setitem(registry.ENGINES, "vllm", "engine_without_backend:Engine")
    with pytest.raises(ImportError) as caught:
        create_engine("vllm", EngineConfig(model="tiny.en"))
    assert str(caught.value) == (
        "engine 'vllm' needs the 'vllm' extra (no module named 'backend_that_is_not_installed'): "
        "run pip install -e '.[vllm]' in your audio-reward checkout"
    )


def test_a_broken_import_inside_the_package_is_not_blamed_on_an_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.ENGINES, "vllm", "audio_reward.scorer_server.engines.no_such_module:Engine")
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        create_engine("vllm", EngineConfig(model="tiny.en"))


def test_several_extras_are_named_together_with_one_command() -> None:
    missing = ModuleNotFoundError(name="fastapi")
    assert missing_extra_message(["server", "base-model"], "audio-reward serve:", missing) == (
        "audio-reward serve: needs the 'server' and 'base-model' extras (no module named 'fastapi'): "
        "run pip install -e '.[server,base-model]' in your audio-reward checkout"
    )
