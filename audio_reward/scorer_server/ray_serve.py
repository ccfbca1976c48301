"""Scale the scorer out on Ray Serve: one replica per GPU, one URL, autoscaling on queue depth.

Each replica is the ordinary scorer app (:func:`.app.build_app`) with its own
engine and micro-batch scheduler, wrapped with ``@serve.ingress``; Ray Serve's proxy
spreads requests over the replicas and its autoscaler adds or removes
replicas to keep about ``target_ongoing_requests`` requests in each.  Every
response carries ``X-Scorer-Replica`` so load spreading can be observed.

Run it on a Ray cluster (``ray start --head`` on one node, ``ray start
--address=HEAD:6379`` on the others)::

    python -m audio_reward.scorer_server.ray_serve --engine vllm --model openai/whisper-large-v3 \\
        --device cuda --min-replicas 1 --max-replicas 8 --gpus-per-replica 1 --host 0.0.0.0 --port 8000

or build the application in Python with :func:`build_application` and pass
it to ``serve.run``.  The scorer flags are those of ``audio-reward serve``
(:mod:`.flags`), the scale-out flags this module's own (:mod:`.scale_out`).

The driver validates the settings once, environment included, and ships
them to the replicas as a plain dump; a replica rebuilds them as a
:class:`~.config.ServerConfig`, which reads no environment, so every
replica runs the driver's settings whatever its node's variables say.

Ray Serve's proxy, not the scorer's uvicorn, reads the requests: it takes
the host, the port and ``keep_alive_timeout_s`` from the settings, and has no
setting for the limits in :data:`PROXY_UNAPPLIED`, so an operator who sets
one of those is warned at start-up that it does not apply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from .config import ServerConfig
from .engines.base import ASREngine
from .flags import InvalidSettingsError, add_server_flags, settings_from_args
from .scale_out import ScaleOutConfig, add_scale_out_flags, scale_out_from_args

__all__ = ["APP_NAME", "REPLICA_HEADER", "ScaleOutConfig", "ScorerReplica", "build_application", "main", "run"]

log = logging.getLogger(__name__)

REPLICA_HEADER = "X-Scorer-Replica"
APP_NAME = "audio-reward"
PROXY_UNAPPLIED = ("max_header_bytes", "header_timeout_s", "max_connections")
"""Limits of the scorer's own uvicorn (:mod:`.http.server`) that Ray Serve's proxy has no setting for."""


def shipped(settings: ServerConfig) -> dict[str, Any]:
    """The validated settings as replicas receive them; the key file was read on the driver already.

    Only the fields the operator set travel (the rest are the same defaults on
    both sides), so a replica still tells a chosen setting from a default.
    """
    return settings.model_dump(exclude={"api_key_file"}, exclude_unset=True)


def engine_entry(settings: ServerConfig) -> str | None:
    """The driver's registry entry (``module:factory``) for the settings' engine, shipped with them.

    A replica process imports the registry afresh, so an engine registered on the
    driver only (a plugin, a test engine) would be unknown there without it.
    """
    from .engines import registry

    return registry.ENGINES.get(settings.engine)


class ScorerReplica:
    """One scorer app with its own engine; Ray Serve runs one per GPU."""

    def __init__(self, settings: dict[str, Any], engine_factory: str | None = None) -> None:
        self.settings = ServerConfig.model_validate(settings)  # the driver's values; no environment read here
        if engine_factory is not None:
            from .engines import registry

            registry.ENGINES.setdefault(self.settings.engine, engine_factory)
        self.replica_id = _replica_id()
        self.engine: ASREngine | None = None

    async def _load(self) -> ASREngine:
        # Ray Serve sends traffic to a replica once its constructor returns, so the model loads
        # there; a background load in the app would answer 503 until it finished.
        from .app import engine_from_settings

        engine = engine_from_settings(self.settings)
        await asyncio.to_thread(engine.load)
        await asyncio.to_thread(engine.warmup)
        log.info("replica ready", extra={"replica": self.replica_id, "model": engine.info.model_id})
        return engine

    def __serve_build_asgi_app__(self) -> Any:
        from .app import build_app

        if self.engine is None:
            raise RuntimeError("the replica's engine is not loaded")
        app = build_app(self.settings, engine=self.engine, engine_preloaded=True)

        @app.middleware("http")
        async def tag_replica(request: Any, call_next: Any) -> Any:
            response = await call_next(request)
            response.headers[REPLICA_HEADER] = self.replica_id
            return response

        self._scorer_app = app  # not `app`: Ray's ingress wrapper owns that name
        return app

    def check_health(self) -> None:
        """Ray Serve restarts a replica whose engine failed."""
        state = getattr(getattr(self, "_scorer_app", None), "state", None)
        parts = getattr(state, "parts", None)
        if load_error := (parts.engine_client.state.load_error if parts is not None else None):
            raise RuntimeError(f"engine failed: {load_error}")


def _replica_id() -> str:
    try:
        from ray import serve

        return str(serve.get_replica_context().replica_id.unique_id)
    except Exception:  # noqa: BLE001 - outside a replica (tests constructing the class directly)
        return f"pid-{os.getpid()}"


def _replica_class() -> type:
    """``ScorerReplica`` with an async constructor that loads the model, wrapped by ``serve.ingress``."""
    from ray import serve

    class Replica(ScorerReplica):
        async def __init__(self, settings: dict[str, Any],  # type: ignore[misc]
                           engine_factory: str | None = None) -> None:
            ScorerReplica.__init__(self, settings, engine_factory)
            self.engine = await self._load()

    Replica.__name__ = Replica.__qualname__ = "ScorerReplica"
    return serve.ingress()(Replica)  # late-bound: the app is built per replica by __serve_build_asgi_app__


def build_application(settings: ServerConfig, scale: ScaleOutConfig) -> Any:
    """The Ray Serve application (``serve.run(build_application(...), route_prefix="/")``)."""
    from ray import serve

    # serve.deployment's overloads describe its decorator form; called with a class it returns a Deployment.
    deployment = serve.deployment(_replica_class(), name="scorer").options(  # type: ignore[attr-defined]
        **scale.deployment_options())
    return deployment.bind(shipped(settings), engine_entry(settings))


def proxy_options(settings: ServerConfig) -> dict[str, Any]:
    """Ray Serve's ``http_options`` from the settings (its keep-alive timeout is whole seconds)."""
    return {"host": settings.host, "port": settings.port,
            "keep_alive_timeout_s": max(1, math.ceil(settings.keep_alive_timeout_s))}


def unapplied_settings(settings: ServerConfig) -> list[str]:
    """The settings the operator chose that Ray Serve's proxy cannot apply."""
    return sorted(settings.model_fields_set & set(PROXY_UNAPPLIED))


def run(settings: ServerConfig, scale: ScaleOutConfig, *, blocking: bool = True) -> str:
    """Start (or join) Ray, deploy the scorer on the settings' host and port and return its base URL."""
    import ray
    from ray import serve

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=scale.address, log_to_driver=False)
    if unapplied := unapplied_settings(settings):
        log.warning("not applied under Ray Serve, whose proxy reads the requests: " + ", ".join(unapplied))
    serve.start(http_options=proxy_options(settings))
    serve.run(build_application(settings, scale), name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://{settings.host}:{settings.port}"
    if blocking:
        # SIGTERM (systemd, Kubernetes, a test harness) stops the deployment as cleanly as Ctrl-C.
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # raises KeyboardInterrupt
        log.warning("scorer deployed on Ray Serve", extra={"url": url})
        try:
            while True:
                serve_status = serve.status().applications.get(APP_NAME)
                if serve_status is not None and str(serve_status.status).endswith("DEPLOY_FAILED"):
                    raise RuntimeError(f"deployment failed: {serve_status.message}")
                time.sleep(2)
        except KeyboardInterrupt:
            pass
        finally:
            serve.shutdown()
            if started_ray:
                ray.shutdown()
    return url


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m audio_reward.scorer_server.ray_serve",
        description="Run the scorer on Ray Serve: one replica per GPU behind one URL, autoscaled on queue depth.",
    )
    add_server_flags(parser)
    add_scale_out_flags(parser.add_argument_group("Ray Serve"))
    return parser


def deploy_from_args(settings: ServerConfig, args: argparse.Namespace) -> int:
    """Deploy validated ``settings`` with the scale-out flags in ``args`` and block until stopped.

    Exit status 2, with one line on stderr, when the scale-out flags do not validate.
    """
    from pydantic import ValidationError

    from audio_reward.protocol.errors import validation_reasons

    try:
        scale = scale_out_from_args(args)
    except ValidationError as exc:
        print("audio-reward ray serve: invalid scale-out settings: " + "; ".join(validation_reasons(exc)),
              file=sys.stderr)
        return 2
    print("audio-reward ray serve: " + json.dumps({"settings": settings.describe(), "scale": scale.model_dump()},
                                                  sort_keys=True), flush=True)
    print(f"audio-reward ray serve: deploying at http://{settings.host}:{settings.port}; ready when /readyz "
          "answers 200 (Ctrl-C or SIGTERM stops)", flush=True)
    run(settings, scale)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except InvalidSettingsError as exc:
        print(f"audio-reward ray serve: {exc}", file=sys.stderr)
        return 2
    return deploy_from_args(settings, args)


if __name__ == "__main__":
    sys.exit(main())
