"""Engines by name, imported lazily so a missing optional backend costs nothing."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from audio_reward.extras import is_missing_dependency, missing_extra_message

from .base import ASREngine, EngineConfig, resolve_engine_options

# name -> (the engine's module in this package and its factory, the pyproject extra that installs its backend,
# the third-party modules that backend imports when it loads).
_BUILT_IN: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "faster-whisper": ("faster_whisper_engine:FasterWhisperEngine", "server", ("faster_whisper", "ctranslate2")),
    "transformers": ("transformers_engine:TransformersEngine", "transformers", ("torch", "transformers")),
    "vllm": ("vllm_engine:VLLMEngine", "vllm", ("vllm",)),
    "funasr": ("funasr_engine:FunASREngine", "funasr", ("funasr",)),
}

# name -> "module:factory"; a factory takes an EngineConfig and returns an unloaded engine.
ENGINES: dict[str, str] = {name: f"{__package__}.{target}" for name, (target, _, _) in _BUILT_IN.items()}
# name -> the extra named in the hint when the backend is missing.
ENGINE_EXTRAS: dict[str, str] = {name: extra for name, (_, extra, _) in _BUILT_IN.items()}
# name -> the modules its backend imports lazily (importing the engine's module does not show they are missing).
ENGINE_MODULES: dict[str, tuple[str, ...]] = {name: modules for name, (_, _, modules) in _BUILT_IN.items()}


class UnknownEngineError(ValueError):
    pass


def missing_engine_module(name: str) -> ModuleNotFoundError | None:
    """The first module of :data:`ENGINE_MODULES` that engine ``name`` needs and is not installed; None if all are."""
    absent = next((m for m in ENGINE_MODULES.get(name, ()) if importlib.util.find_spec(m) is None), None)
    return None if absent is None else ModuleNotFoundError(f"No module named {absent!r}", name=absent)


def create_engine(name: str, config: EngineConfig) -> ASREngine:
    """Build (not load) the engine called ``name``.

    Raises :class:`~.base.EngineOptionError` (a ValueError) when ``config.options``
    holds a key the engine does not take or a value of the wrong type, and an
    ImportError naming the engine's extra (:data:`ENGINE_EXTRAS`) when a
    third-party module its module imports is not installed.
    """
    try:
        target = ENGINES[name]
    except KeyError:
        raise UnknownEngineError(f"unknown engine {name!r}; available: {', '.join(sorted(ENGINES))}") from None
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        extra = ENGINE_EXTRAS.get(name)
        if extra is None or not is_missing_dependency(exc):
            raise
        raise ImportError(missing_extra_message(extra, f"engine {name!r}", exc)) from exc
    factory: Callable[[EngineConfig], ASREngine] = getattr(module, attr)
    resolve_engine_options(name, getattr(factory, "OPTIONS", {}), config.options)  # fail before building
    # Fail here, not in the background load after the server listens.
    if (absent := missing_engine_module(name)) is not None:
        raise ImportError(missing_extra_message(ENGINE_EXTRAS[name], f"engine {name!r}", absent))
    return factory(config)
