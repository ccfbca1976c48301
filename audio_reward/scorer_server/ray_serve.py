"""Scale the scorer out on Ray Serve: one replica per GPU, one URL, autoscaling on queue depth.

Each replica is the ordinary scorer app (:func:`.app.build_app`) with its own
engine and micro-batcher, wrapped with ``@serve.ingress``; Ray Serve's proxy
spreads requests over the replicas and its autoscaler adds or removes
replicas to keep about ``target_ongoing_requests`` requests in each.  Every
response carries ``X-Scorer-Replica`` so load spreading can be observed.

Run it on a Ray cluster (``ray start --head`` on one node, ``ray start
--address=HEAD:6379`` on the others)::

    python -m audio_reward.scorer_server.ray_serve --engine vllm --model openai/whisper-large-v3 \\
        --device cuda --min-replicas 1 --max-replicas 8 --gpus-per-replica 1 --host 0.0.0.0 --port 8000

or build the application in Python with :func:`build_application` and pass
it to ``serve.run``.  The scorer flags are those of ``audio-reward serve``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from .engines.base import ASREngine

log = logging.getLogger(__name__)

REPLICA_HEADER = "X-Scorer-Replica"
APP_NAME = "audio-reward"


@dataclass(frozen=True)
class ScaleOutConfig:
    """How many replicas, what each one holds, and when the autoscaler acts."""

    min_replicas: int = 1
    max_replicas: int = 1
    initial_replicas: int | None = None
    gpus_per_replica: float = 1.0
    cpus_per_replica: float = 1.0
    target_ongoing_requests: float = 32.0
    """Requests in flight per replica the autoscaler aims for; about two micro-batches keeps a GPU busy."""
    max_ongoing_requests: int = 256
    """Above this Ray queues at the proxy instead of sending more to the replica."""
    upscale_delay_s: float = 10.0
    downscale_delay_s: float = 120.0
    extra_actor_options: dict[str, Any] = field(default_factory=dict)

    def deployment_options(self) -> dict[str, Any]:
        """Keyword arguments for ``serve.deployment(...).options``."""
        if not 0 < self.min_replicas <= self.max_replicas:
            raise ValueError("need 0 < min_replicas <= max_replicas")
        actor: dict[str, Any] = {"num_cpus": self.cpus_per_replica, **self.extra_actor_options}
        if self.gpus_per_replica:
            actor["num_gpus"] = self.gpus_per_replica
        autoscaling = {
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "target_ongoing_requests": self.target_ongoing_requests,
            "upscale_delay_s": self.upscale_delay_s,
            "downscale_delay_s": self.downscale_delay_s,
        }
        if self.initial_replicas is not None:
            autoscaling["initial_replicas"] = self.initial_replicas
        options: dict[str, Any] = {"ray_actor_options": actor, "max_ongoing_requests": self.max_ongoing_requests}
        if self.min_replicas == self.max_replicas:
            options["num_replicas"] = self.min_replicas
        else:
            options["autoscaling_config"] = autoscaling
        return options


class ScorerReplica:
    """One scorer app with its own engine; Ray Serve runs one per GPU."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from .settings import ServerSettings

        self.settings = ServerSettings(**settings)
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
        replica_id = self.replica_id

        @app.middleware("http")
        async def tag_replica(request: Any, call_next: Any) -> Any:
            response = await call_next(request)
            response.headers[REPLICA_HEADER] = replica_id
            return response

        self._scorer_app = app  # not `app`: Ray's ingress wrapper owns that name
        return app

    def check_health(self) -> None:
        """Ray Serve restarts a replica whose engine failed."""
        state = getattr(getattr(self, "_scorer_app", None), "state", None)
        scorer = getattr(state, "scorer", None)
        if scorer is not None and scorer.load_error:
            raise RuntimeError(f"engine failed: {scorer.load_error}")


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
        async def __init__(self, settings: dict[str, Any]) -> None:  # type: ignore[misc]
            ScorerReplica.__init__(self, settings)
            self.engine = await self._load()

    Replica.__name__ = Replica.__qualname__ = "ScorerReplica"
    return serve.ingress()(Replica)  # late-bound: the app is built per replica by __serve_build_asgi_app__


def build_application(settings: dict[str, Any], scale: ScaleOutConfig) -> Any:
    """The Ray Serve application (``serve.run(build_application(...), route_prefix="/")``)."""
    from ray import serve

    from .settings import ServerSettings

    ServerSettings(**settings)  # fail here, before any replica starts, on invalid settings
    deployment = serve.deployment(_replica_class(), name="scorer").options(**scale.deployment_options())
    return deployment.bind(settings)


def run(settings: dict[str, Any], scale: ScaleOutConfig, *, address: str | None = None,
        host: str = "127.0.0.1", port: int = 8000, blocking: bool = True) -> str:
    """Start (or join) Ray, deploy the scorer on ``host:port`` and return its base URL."""
    import ray
    from ray import serve

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=address, log_to_driver=False)
    serve.start(http_options={"host": host, "port": port})
    serve.run(build_application(settings, scale), name=APP_NAME, route_prefix="/", blocking=False)
    url = f"http://{host}:{port}"
    if blocking:
        # SIGTERM (systemd, Kubernetes, a test harness) stops the deployment as cleanly as Ctrl-C.
        signal.signal(signal.SIGTERM, _interrupt)
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


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _parser() -> argparse.ArgumentParser:
    from .cli import FLAGS

    parser = argparse.ArgumentParser(
        prog="python -m audio_reward.scorer_server.ray_serve",
        description="Run the scorer on Ray Serve: one replica per GPU behind one URL, autoscaled on queue depth.",
    )
    for flag, kind, text in FLAGS:
        parser.add_argument(f"--{flag}", type=kind, default=None, help=text)
    add_scale_out_arguments(parser)
    return parser


def add_scale_out_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """The Ray Serve flags, shared by this module's command line and ``audio-reward serve --ray``."""
    defaults = ScaleOutConfig()
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start or join a local one)")
    parser.add_argument("--min-replicas", type=int, default=defaults.min_replicas)
    parser.add_argument("--max-replicas", type=int, default=defaults.max_replicas)
    parser.add_argument("--gpus-per-replica", type=float, default=defaults.gpus_per_replica,
                        help="GPUs each replica reserves (0 for CPU replicas)")
    parser.add_argument("--cpus-per-replica", type=float, default=defaults.cpus_per_replica)
    parser.add_argument("--target-ongoing-requests", type=float, default=defaults.target_ongoing_requests,
                        help="requests in flight per replica the autoscaler aims for")
    parser.add_argument("--max-ongoing-requests", type=int, default=defaults.max_ongoing_requests,
                        help="most requests in flight per replica; more wait at Ray's proxy")


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(_parser().parse_args(argv))


def run_from_args(args: argparse.Namespace) -> int:
    """Deploy from parsed ``audio-reward serve --ray`` (or this module's) arguments and block."""
    from .cli import overrides_from_args

    settings = overrides_from_args(args)
    host, port = settings.pop("host", "127.0.0.1"), settings.pop("port", 8000)
    scale = ScaleOutConfig(
        min_replicas=args.min_replicas, max_replicas=args.max_replicas, gpus_per_replica=args.gpus_per_replica,
        cpus_per_replica=args.cpus_per_replica, target_ongoing_requests=args.target_ongoing_requests,
        max_ongoing_requests=args.max_ongoing_requests,
    )
    print("audio-reward ray serve: " + str({"settings": settings, "scale": asdict(scale)}), flush=True)
    print(f"audio-reward ray serve: deploying at http://{host}:{port}; ready when /readyz answers 200 "
          "(Ctrl-C or SIGTERM stops)", flush=True)
    run(settings, scale, address=args.address, host=host, port=port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
