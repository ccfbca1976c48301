"""The FastAPI application: its parts built once, the routers over them, start-up and shutdown.

:func:`build_app` builds every part of the service from the settings (the
engine, the metrics, the recent answers, the normalizer and reward policy,
the scoring pipeline, the transcription service and the ``/v1/info``
description), keeps them on
``app.state`` and includes the routers, which take them with ``Depends``
(:mod:`.http.deps`).  The engine loads in the background after the server
starts listening, so ``/healthz`` answers at once and ``/readyz`` says 503
until the model is loaded and warmed up; then the scheduler starts and
:class:`~.service.readiness.Readiness` holds it.  On shutdown uvicorn first
lets requests in flight finish (``shutdown_grace_s``), then the scheduler
drains what is queued.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from audio_reward import __version__
from audio_reward.protocol import BatchScoreRequest, ScoreRequest, SpeakerRequest
from audio_reward.scoring import get_normalizer

from .config import ServerConfig
from .engines.base import ASREngine
from .engines.model_store import ModelNotAvailableError
from .engines.registry import EngineConfig, create_engine
from .http import health, info, metrics, openai, score, speakers
from .http.apidocs import add_request_examples, offline_docs_app
from .http.errors import install_error_handlers
from .http.middleware import RequestContextMiddleware
from .openai_protocol import TranscriptionUploadDoc
from .service.dedup import RecentResults
from .service.info import ServerInfo
from .service.pipeline import ScoringPipeline
from .service.prometheus import ServerMetrics
from .service.readiness import Readiness
from .service.scheduler import scheduler_for
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
        quality=create_quality_scorer(settings.quality_model, device=settings.signal_device, cpu_threads=threads),
        store=SpeakerReferenceStore(max_entries=settings.speaker_reference_count,
                                    max_bytes=settings.speaker_reference_bytes, ttl_s=settings.speaker_reference_ttl_s),
        limits=settings.limits,
        max_batch_size=settings.signal_max_batch_size,
        max_queue=settings.max_queue,
        on_batch=metrics.observe_signal_batch,
    )


def engine_from_settings(settings: ServerConfig) -> ASREngine:
    """Build (not load) the engine the settings name."""
    config = EngineConfig(
        model=settings.model,
        device=settings.device,
        compute_type=settings.compute_type,
        max_batch_size=settings.max_batch_size,
        cpu_threads=settings.cpu_threads,
        beam_size=settings.beam_size,
        options=dict(settings.engine_options),
    )
    return create_engine(settings.engine, config)


async def _load_engine(app: FastAPI) -> None:
    settings: ServerConfig = app.state.settings
    engine: ASREngine = app.state.engine
    readiness: Readiness = app.state.readiness
    server_metrics: ServerMetrics = app.state.metrics
    loading = "engine"
    try:
        if not app.state.engine_preloaded:
            await asyncio.to_thread(engine.load)
            await asyncio.to_thread(engine.warmup)
        loading = "signals"
        await asyncio.to_thread(app.state.signals.load)
    except Exception as exc:  # reported on /readyz and in the log, then the server stops
        # Only the exception type goes on the unauthenticated /readyz; the message (paths...) goes to the log.
        readiness.load_error = type(exc).__name__
        if loading == "signals":
            what, extra = "a signal model", {"speaker_model": settings.speaker_model,
                                             "quality_model": settings.quality_model}
        else:
            what, extra = "engine", {"engine": settings.engine, "model": settings.model}
        if isinstance(exc, ModelNotAvailableError):  # its message says what to do: one line, no traceback
            log.error("%s failed to load: %s", what, exc, extra=extra)
        else:
            log.exception("%s failed to load", what, extra=extra)
        if readiness.on_fatal is not None:
            readiness.on_fatal()
        return
    if not engine.prefers_batches and not engine.schedules_itself and settings.max_batch_size > 1:
        readiness.batching_note = (
            f"max_batch_size {settings.max_batch_size} is not used: the {settings.engine} engine on "
            f"{engine.info.device} decodes one utterance per call (batching is no faster there), "
            "so the scheduler hands it one request at a time; on a GPU it batches up to max_batch_size"
        )
    scheduler = scheduler_for(
        engine,
        max_batch_size=settings.max_batch_size,
        max_wait_s=settings.max_wait_ms / 1000.0,
        max_queue=settings.max_queue,
        max_batch_audio_s=settings.max_batch_audio_s,
        max_batches_in_flight=settings.max_batches_in_flight,
        on_batch=server_metrics.observe_batch,
    )
    scheduler.start()
    app.state.signals.start()
    if engine.scheduler_stats():
        server_metrics.watch_engine_scheduler(engine.scheduler_stats)
    readiness.started_scheduler = scheduler
    readiness.ready = True
    server_metrics.ready.set(1)
    engine_info = engine.info
    server_metrics.set_build(engine=engine_info.engine, model=engine_info.model_id)
    log.info("ready", extra={"engine": engine_info.engine, "model": engine_info.model_id,
                             "sha256": engine_info.weights_sha256,
                             "max_batch_size": scheduler.describe()["max_batch_size"]})
    if readiness.batching_note:
        # A warning when the operator chose the batch size, so the setting is not silently ignored.
        chosen = "max_batch_size" in settings.model_fields_set
        log.log(logging.WARNING if chosen else logging.INFO, readiness.batching_note)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    readiness: Readiness = app.state.readiness
    loader = asyncio.create_task(_load_engine(app), name="engine-load")
    try:
        yield
    finally:
        readiness.ready = False
        app.state.metrics.ready.set(0)
        if not loader.done():
            loader.cancel()
        if readiness.started_scheduler is not None:
            await readiness.started_scheduler.close(timeout_s=app.state.settings.shutdown_grace_s)
        await app.state.signals.close(timeout_s=app.state.settings.shutdown_grace_s)
        await asyncio.to_thread(app.state.engine.close)


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        # Bodies are read raw, so FastAPI does not see the request models: add them here.
        for model in (ScoreRequest, BatchScoreRequest, SpeakerRequest, TranscriptionUploadDoc):
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        add_request_examples(schema)
        _drop_validation_responses(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _drop_validation_responses(schema: dict[str, Any]) -> None:
    """Take out the 422 FastAPI documents for every route with a parameter: this server never answers it.

    Bodies are read raw and parameter errors are answered 400 (:mod:`.http.errors`), so the
    document lists only the statuses a client can get.
    """
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                operation.get("responses", {}).pop("422", None)
    components = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)


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
    readiness = Readiness()
    signals = signals_from_settings(settings, server_metrics)
    pipeline = ScoringPipeline(
        engine=engine,
        readiness=readiness,
        normalizer=get_normalizer(settings.normalizer),
        policy=settings.reward,
        metrics=server_metrics,
        recent=RecentResults(settings.dedup_cache_size, settings.dedup_ttl_s, settings.dedup_cache_bytes),
        limits=settings.limits,
        default_language=settings.language,
        request_timeout_s=settings.request_timeout_s,
        signals=signals,
    )
    transcriptions = TranscriptionService(
        pipeline=pipeline, model=settings.model, served_model_name=settings.served_model_name,
        max_audio_seconds=settings.max_audio_seconds, max_audio_bytes=settings.max_audio_bytes,
    )
    app = offline_docs_app(
        title="audio-reward scorer",
        version=__version__,
        description="Speech → ASR → CER/WER → reward, protocol v1. Errors: {\"error\": {code, message, retryable}}; "
                    "the OpenAI-compatible /v1/audio and /v1/models routes answer OpenAI's error shape.",
        lifespan=_lifespan,
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.engine_preloaded = engine_preloaded
    app.state.metrics = server_metrics
    app.state.readiness = readiness
    app.state.pipeline = pipeline
    app.state.signals = signals
    app.state.transcriptions = transcriptions
    app.add_middleware(RequestContextMiddleware, metrics=server_metrics)
    install_error_handlers(app)
    for router in _ROUTERS:
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.state.server_info = ServerInfo(settings, pipeline, _endpoints())
    return app
