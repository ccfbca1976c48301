"""The parts of one app, built once by :func:`.app.build_app` and read by the routers' dependencies (:mod:`.http.deps`).

Its own module so that the dependencies import it without importing the app, which imports the routers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .config import ServerConfig
from .service.engine_client import EngineClient
from .service.pipeline import ScoringPipeline
from .service.prometheus import ServerMetrics
from .service.signals import SignalService
from .service.transcription import TranscriptionService


@dataclass
class ServerParts:
    """Every part of one app, built once by :func:`.app.build_app`; the routers' dependencies read them here."""

    settings: ServerConfig
    engine_client: EngineClient
    signals: SignalService
    metrics: ServerMetrics
    pipeline: ScoringPipeline
    transcriptions: TranscriptionService
    endpoints: tuple[str, ...]
    """The API's concrete paths, as ``/v1/info`` lists them (:func:`.service.info.describe_server`)."""
    engine_preloaded: bool = False
    """The caller loaded and warmed the engine already (a Ray Serve replica loads before taking traffic)."""
    on_fatal: Callable[[], None] | None = None
    """Called when a model cannot load; the CLI uses it to stop the server."""
    on_ready: Callable[[], None] | None = None
    """Called once the models have loaded and requests are taken; the CLI uses it to say so."""
