"""FastAPI dependencies: the parts the app was built with (:class:`..parts.ServerParts`, on ``app.state.parts``)."""

from __future__ import annotations

from typing import cast

from fastapi import Request

from ..config import ServerConfig
from ..parts import ServerParts
from ..service.engine_client import EngineClient
from ..service.info import ServerInfo
from ..service.pipeline import ScoringPipeline
from ..service.prometheus import ServerMetrics
from ..service.signals import SignalService
from ..service.transcription import TranscriptionService


def _parts(request: Request) -> ServerParts:
    return cast(ServerParts, request.app.state.parts)


def get_settings(request: Request) -> ServerConfig:
    return _parts(request).settings


def get_engine_client(request: Request) -> EngineClient:
    return _parts(request).engine_client


def get_metrics(request: Request) -> ServerMetrics:
    return _parts(request).metrics


def get_pipeline(request: Request) -> ScoringPipeline:
    return _parts(request).pipeline


def get_signals(request: Request) -> SignalService:
    return _parts(request).signals


def get_server_info(request: Request) -> ServerInfo:
    return _parts(request).server_info


def get_transcriptions(request: Request) -> TranscriptionService:
    return _parts(request).transcriptions
