"""The FastAPI application: its parts built once, the routers over them, start-up and shutdown.

:func:`build_app` builds every part of the service from the settings
(:class:`~.parts.ServerParts`: the engine client over the engine, the signal
service, the metrics, the scoring pipeline, the transcription service and
the endpoints ``/v1/info`` lists), keeps them on ``app.state.parts`` and
includes the routers, which take them with ``Depends`` (:mod:`.http.deps`).
The models load in the background after the server starts listening, so
``/healthz`` answers at once and ``/readyz`` says 503 until they are loaded
and warmed up; then the engine client starts its scheduler.  On shutdown
uvicorn first lets requests in flight finish (``shutdown_grace_s``), then
the schedulers drain what is queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute

from audio_reward import __version__
from audio_reward.scoring import get_normalizer

from .config import ServerConfig
from .devices import pick_device
from .engines.base import ASREngine
from .engines.model_store import ModelNotAvailableError
from .engines.registry import EngineConfig, create_engine
from .http import health, info, metrics, openai, score, speakers
from .http.apidocs import offline_docs_app
from .http.errors import install_error_handlers
from .http.middleware import RequestContextMiddleware
from .parts import ServerParts
from .service.engine_client import EngineClient, UnsupportedDefaultLanguageError
from .service.pipeline import ScoringPipeline
from .service.prometheus import ServerMetrics
from .service.signals import SignalService
from .service.transcription import TranscriptionService
from .signals.quality import create_quality_scorer
from .signals.references import SpeakerReferenceStore
from .signals.speaker import create_speaker_encoder

log = logging.getLogger(__name__)


def signals_from_settings(settings: ServerConfig, metrics: ServerMetrics) -> SignalService:
    """Build (not load) the speaker and quality models the settings name, with their reference store."""
    threads = settings.signal_threads
    return SignalService(
        speaker=create_speaker_encoder(settings.speaker_model, device=settings.signal_device, cpu_threads=threads),
        quality=create_quality_scorer(settings.quality_model, device=settings.signal_device, cpu_threads=threads,
                                      windows=settings.quality_windows),
        store=SpeakerReferenceStore(max_entries=settings.speaker_reference_count,
                                    max_bytes=settings.speaker_reference_bytes, ttl_s=settings.speaker_reference_ttl_s),
        settings=settings,
        on_batch=metrics.observe_signal_batch,
    )


def engine_from_settings(settings: ServerConfig) -> ASREngine:
    """Build (not load) the engine the settings name, on the device ``auto`` picks (:mod:`.devices`)."""
    device = pick_device(settings.engine, settings.device)
    if device.reason:
        log.info("device %s", device.describe(), extra={"device": device.device})
    # the fields EngineConfig shares with the settings, by name
    shared = settings.model_dump(include={"model", "compute_type", "max_batch_size", "cpu_threads", "beam_size"})
    return create_engine(settings.engine, EngineConfig(**shared, device=device.device,
                                                       options=dict(settings.engine_options)))


def limit_numpy_threads(threads: int) -> None:
    """Limit numpy's BLAS to ``threads`` threads in this process (0: leave it as it is).

    numpy multiplies small matrices here (mel filter banks of the ASR and signal features), where more
    threads gain nothing, and an idle OpenBLAS thread spins for a while on its core, which the model
    libraries' own threads need: at 32 requests in flight on 2 cores, DNSMOS took a fifth more CPU.
    """
    if threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")


async def _load_models(parts: ServerParts) -> None:
    settings, engine_client = parts.settings, parts.engine_client
    limit_numpy_threads(settings.numpy_threads)
    loading = "engine"
    try:
        if not parts.engine_preloaded:
            await asyncio.to_thread(engine_client.load)
        loading = "signals"
        await asyncio.to_thread(parts.signals.load)
    except Exception as exc:  # reported on /readyz and in the log, then the server stops
        # Only the exception type goes on the unauthenticated /readyz; the message (paths...) goes to the log.
        engine_client.state.load_error = type(exc).__name__  # /readyz says so, requests get 503 naming it
        if loading == "signals":
            what, extra = "a signal model", {"speaker_model": settings.speaker_model,
                                             "quality_model": settings.quality_model}
        else:
            what, extra = "engine", {"engine": settings.engine, "model": settings.model}
        if isinstance(exc, (ModelNotAvailableError, UnsupportedDefaultLanguageError)):
            # Its message says what to do: one line, no traceback.
            log.error("%s failed to load: %s", what, exc, extra=extra)
        else:
            log.exception("%s failed to load", what, extra=extra)
        if parts.on_fatal is not None:
            parts.on_fatal()
        return
    parts.signals.start()
    engine_client.start()
    info = engine_client.info
    batching = engine_client.describe_batching()
    log.info("ready", extra={"engine": info.engine, "model": info.model_id, "sha256": info.weights_sha256,
                             "max_batch_size": batching.max_batch_size})
    if parts.on_ready is not None:
        parts.on_ready()
    if batching.note:
        # A warning when the operator chose the batch size, so the setting is not silently ignored.
        log.log(logging.WARNING if "max_batch_size" in settings.model_fields_set else logging.INFO, batching.note)


def _lifespan(parts: ServerParts) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        loader = asyncio.create_task(_load_models(parts), name="models-load")
        try:
            yield
        finally:
            parts.engine_client.stop_taking_requests()
            loader.cancel()  # nothing to cancel once the models have loaded
            grace_s = parts.settings.shutdown_grace_s
            await parts.signals.close(timeout_s=grace_s)
            await parts.engine_client.close(timeout_s=grace_s)

    return lifespan


_ROUTERS = (score.router, speakers.router, openai.router, info.router, health.router, metrics.router)


def _endpoints() -> tuple[str, ...]:
    """The API's concrete paths, in the order the routers declare them (templated and undocumented ones left out)."""
    return tuple(dict.fromkeys(route.path for router in _ROUTERS for route in router.routes
                               if isinstance(route, APIRoute) and route.include_in_schema and "{" not in route.path))


def build_app(settings: ServerConfig, engine: ASREngine | None = None, *, engine_preloaded: bool = False) -> FastAPI:
    """The scorer app with every part built.  ``engine`` replaces the one the settings name.

    The engine is loaded and warmed in the background unless ``engine_preloaded``
    says the caller already did both (a Ray Serve replica loads before taking traffic).
    """
    engine = engine if engine is not None else engine_from_settings(settings)
    server_metrics = ServerMetrics()
    server_metrics.set_build(engine=settings.engine, model=settings.model)
    engine_client = EngineClient(engine, settings, server_metrics)
    signals = signals_from_settings(settings, server_metrics)
    normalizer = get_normalizer(settings.normalizer)
    parts = ServerParts(
        settings=settings,
        engine_client=engine_client,
        signals=signals,
        metrics=server_metrics,
        pipeline=ScoringPipeline(engine_client=engine_client, normalizer=normalizer, policy=settings.reward,
                                 metrics=server_metrics, limits=settings.limits, signals=signals),
        transcriptions=TranscriptionService(engine_client, server_metrics, settings),
        endpoints=_endpoints(),
        engine_preloaded=engine_preloaded,
    )
    app = offline_docs_app(
        title="audio-reward scorer",
        version=__version__,
        description="Speech → ASR → CER/WER → reward, protocol v1. Errors: {\"error\": {code, message, retryable}}; "
                    "the OpenAI-compatible /v1/audio and /v1/models routes answer OpenAI's error shape.",
        lifespan=_lifespan(parts),
        redirect_slashes=False,
    )
    app.state.parts = parts
    app.add_middleware(RequestContextMiddleware, metrics=server_metrics)
    install_error_handlers(app)
    for router in _ROUTERS:
        app.include_router(router)
    return app
