"""ASR engines behind one interface (:class:`ASREngine`)."""

from .base import (
    ENGINE_SAMPLE_RATE,
    ASREngine,
    EngineInfo,
    EngineOption,
    EngineOptionError,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
    max_new_tokens_for,
    resolve_engine_options,
)
from .registry import ENGINES, EngineConfig, UnknownEngineError, create_engine

__all__ = [
    "ENGINE_SAMPLE_RATE", "ASREngine", "EngineInfo", "EngineOption", "EngineOptionError", "ThreadedEngine",
    "Transcription", "TranscriptionInput", "max_new_tokens_for", "resolve_engine_options",
    "ENGINES", "EngineConfig", "UnknownEngineError", "create_engine",
]
