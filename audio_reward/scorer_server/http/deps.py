"""FastAPI dependencies: the parts the app was built with (:class:`..parts.ServerParts`, on ``app.state.parts``).

They are coroutines although they only read an attribute: FastAPI runs a plain ``def`` dependency in its
thread pool, one hop per dependency and request (two on ``/v1/score``), which cost more than a millisecond
each at concurrency 1 on a loaded machine (``bench/latency_profile.py``).  Code that needs a part outside
dependency injection calls the ``*_of`` accessors.
"""

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


async def get_settings(request: Request) -> ServerConfig:
    return _parts(request).settings


async def get_engine_client(request: Request) -> EngineClient:
    return _parts(request).engine_client


def metrics_of(request: Request) -> ServerMetrics:
    return _parts(request).metrics


async def get_metrics(request: Request) -> ServerMetrics:
    return metrics_of(request)


async def get_pipeline(request: Request) -> ScoringPipeline:
    return _parts(request).pipeline


async def get_signals(request: Request) -> SignalService:
    return _parts(request).signals


async def get_server_info(request: Request) -> ServerInfo:
    return _parts(request).server_info


async def get_transcriptions(request: Request) -> TranscriptionService:
    return _parts(request).transcriptions
