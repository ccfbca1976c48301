"""FastAPI dependencies: the parts the app was built with, as kept on ``app.state`` by :func:`..app.build_app`."""

from __future__ import annotations

from typing import cast

from fastapi import Request

from ..config import ServerConfig
from ..engines.base import ASREngine
from ..service.info import ServerInfo
from ..service.pipeline import ScoringPipeline
from ..service.prometheus import ServerMetrics
from ..service.readiness import Readiness
from ..service.signals import SignalService
from ..service.transcription import TranscriptionService


def get_settings(request: Request) -> ServerConfig:
    return cast(ServerConfig, request.app.state.settings)


def get_engine(request: Request) -> ASREngine:
    return cast(ASREngine, request.app.state.engine)


def get_readiness(request: Request) -> Readiness:
    return cast(Readiness, request.app.state.readiness)


def get_metrics(request: Request) -> ServerMetrics:
    return cast(ServerMetrics, request.app.state.metrics)


def get_pipeline(request: Request) -> ScoringPipeline:
    return cast(ScoringPipeline, request.app.state.pipeline)


def get_signals(request: Request) -> SignalService:
    return cast(SignalService, request.app.state.signals)


def get_server_info(request: Request) -> ServerInfo:
    return cast(ServerInfo, request.app.state.server_info)


def get_transcriptions(request: Request) -> TranscriptionService:
    return cast(TranscriptionService, request.app.state.transcriptions)
