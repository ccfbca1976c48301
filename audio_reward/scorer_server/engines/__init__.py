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

__all__ = ["ENGINES", "ENGINE_SAMPLE_RATE", "ASREngine", "EngineConfig", "EngineInfo", "EngineOption",
           "EngineOptionError", "ThreadedEngine", "Transcription", "TranscriptionInput", "UnknownEngineError",
           "create_engine", "max_new_tokens_for", "resolve_engine_options"]
