"""The FastAPI application: routers, error handlers, start-up and shutdown.

The engine loads in the background after the server starts listening, so
``/healthz`` answers at once and ``/readyz`` says 503 until the model is
loaded and warmed up.  On shutdown uvicorn first lets requests in flight
finish (``shutdown_grace_s``), then the batcher drains what is queued.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from audio_reward import __version__
from audio_reward.protocol import BatchScoreRequest, ScoreRequest

from .apidocs import add_request_examples, offline_docs_app
from .batcher import scheduler_for
from .engines.base import ASREngine
from .engines.registry import EngineConfig, create_engine
from .errors import ServerError, error_body, server_error_body
from .health.api_router import router as health_router
from .info.api_router import router as info_router
from .metrics import ServerMetrics
from .metrics.api_router import router as metrics_router
from .middleware import RequestContextMiddleware, request_id_of
from .openai_api.api_router import router as openai_router
from .openai_api.protocol import OPENAI_PATH_PREFIXES, TranscriptionUploadDoc
from .openai_api.serving import openai_error_body
from .responses import OrjsonResponse
from .score.api_router import router as score_router
from .score.recent import RecentResults
from audio_reward.scoring import get_normalizer
from .settings import ServerSettings
from .state import ServerState

log = logging.getLogger(__name__)

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large", 401: "unauthorized"}


def engine_from_settings(settings: ServerSettings) -> ASREngine:
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


async def _load_engine(state: ServerState) -> None:
    settings = state.settings
    try:
        if not state.engine_preloaded:
            await asyncio.to_thread(state.engine.load)
            await asyncio.to_thread(state.engine.warmup)
    except Exception as exc:  # noqa: BLE001 - reported on /readyz and in the log, then the server stops
        # Only the exception type goes on the unauthenticated /readyz; the message (paths...) goes to the log.
        state.load_error = type(exc).__name__
        log.error("engine failed to load", exc_info=True, extra={"engine": settings.engine, "model": settings.model})
        if state.on_fatal is not None:
            state.on_fatal()
        return
    batches = state.engine.prefers_batches
    if not batches and not state.engine.schedules_itself and settings.max_batch_size > 1:
        state.batching_note = (
            f"max_batch_size {settings.max_batch_size} is not used: the {settings.engine} engine on "
            f"{state.engine.info.device} decodes one utterance per call (batching is no faster there), "
            "so the batcher hands it one request at a time; on a GPU it batches up to max_batch_size"
        )
    batcher = scheduler_for(
        state.engine,
        max_batch_size=settings.max_batch_size,
        max_wait_s=settings.max_wait_ms / 1000.0,
        max_queue=settings.max_queue,
        max_batch_audio_s=settings.max_batch_audio_s,
        max_batches_in_flight=settings.max_batches_in_flight,
        on_batch=state.metrics.observe_batch,
    )
    batcher.start()
    state.batcher = batcher
    state.ready = True
    state.metrics.ready.set(1)
    info = state.engine.info
    state.metrics.set_build(engine=info.engine, model=info.model_id)
    log.info("ready", extra={"engine": info.engine, "model": info.model_id, "sha256": info.weights_sha256,
                             "max_batch_size": batcher.max_batch_size})
    if state.batching_note:
        # A warning when the operator chose the batch size, so the setting is not silently ignored.
        chosen = "max_batch_size" in settings.model_fields_set
        log.log(logging.WARNING if chosen else logging.INFO, state.batching_note)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: ServerState = app.state.scorer
    loader = asyncio.create_task(_load_engine(state), name="engine-load")
    try:
        yield
    finally:
        state.ready = False
        state.metrics.ready.set(0)
        if not loader.done():
            loader.cancel()
        if state.batcher is not None:
            await state.batcher.close(timeout_s=state.settings.shutdown_grace_s)
        await asyncio.to_thread(state.engine.close)


async def _server_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, ServerError)
    return OrjsonResponse(server_error_body(exc, request_id_of(request)), status_code=exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    if exc.status_code == 404:
        path = request.url.path
        # No redirect for a trailing slash: a Location built from the Host header could point anywhere.
        near = path.rstrip("/")
        hint = f"did you mean {near}?" if near != path and _has_route(request, near) else "see /docs"
        message = f"no endpoint at {path}; {hint}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    if request.url.path.startswith(OPENAI_PATH_PREFIXES):
        # OpenAI clients read only their own error shape, also for a path or method that does not exist.
        body = openai_error_body(exc.status_code, code, message)
    else:
        body = error_body(code, message, retryable=exc.status_code >= 500, request_id=request_id_of(request))
    return OrjsonResponse(body, status_code=exc.status_code, headers=dict(exc.headers or {}))


def _has_route(request: Request, path: str) -> bool:
    scope = {**request.scope, "path": path}
    return any(route.matches(scope)[0] is not Match.NONE for route in request.app.router.routes)


async def _validation_error(request: Request, exc: Exception) -> OrjsonResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    message = str(first.get("msg", "invalid request"))
    return OrjsonResponse(error_body("invalid_request", message, retryable=False, request_id=request_id_of(request)),
                          status_code=400)


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        # Bodies are read raw, so FastAPI does not see the request models: add them here.
        for model in (ScoreRequest, BatchScoreRequest, TranscriptionUploadDoc):
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        add_request_examples(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def build_app(settings: ServerSettings, engine: ASREngine | None = None, *, engine_preloaded: bool = False) -> FastAPI:
    """The scorer app.  ``engine`` replaces the one the settings name.

    The engine is loaded and warmed in the background unless ``engine_preloaded``
    says the caller already did both (a Ray Serve replica loads before taking traffic).
    """
    state = ServerState(
        settings=settings,
        engine=engine if engine is not None else engine_from_settings(settings),
        policy=settings.reward_policy(),
        normalizer=get_normalizer(settings.normalizer),
        metrics=ServerMetrics(),
        engine_preloaded=engine_preloaded,
        recent=RecentResults(settings.dedup_cache_size, settings.dedup_ttl_s, settings.dedup_cache_bytes)
        if settings.dedup_cache_size else None,
    )
    app = offline_docs_app(
        title="audio-reward scorer",
        version=__version__,
        description="Speech → ASR → CER/WER → reward, protocol v1. Errors: {\"error\": {code, message, retryable}}; "
                    "the OpenAI-compatible /v1/audio and /v1/models routes answer OpenAI's error shape.",
        lifespan=_lifespan,
        redirect_slashes=False,
    )
    app.state.scorer = state
    state.metrics.set_build(engine=settings.engine, model=settings.model)
    app.add_middleware(RequestContextMiddleware, metrics=state.metrics)
    app.add_exception_handler(ServerError, _server_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for router in (score_router, openai_router, info_router, health_router, metrics_router):
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app
