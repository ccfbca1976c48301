"""ASR engines behind one interface (:class:`ASREngine`)."""

from .base import ENGINE_SAMPLE_RATE, ASREngine, EngineInfo, ThreadedEngine, Transcription, TranscriptionInput, max_new_tokens_for
from .registry import ENGINES, EngineConfig, UnknownEngineError, create_engine

__all__ = [
    "ENGINE_SAMPLE_RATE", "ASREngine", "EngineInfo", "ThreadedEngine", "Transcription", "TranscriptionInput",
    "max_new_tokens_for", "ENGINES", "EngineConfig", "UnknownEngineError", "create_engine",
]
