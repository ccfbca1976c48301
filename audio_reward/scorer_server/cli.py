"""``audio-reward serve``: run the scorer server under uvicorn.

Every settings field has its flag, generated from the settings model
(:mod:`.flags`: ``--max-batch-size`` → ``max_batch_size``, ``--reward-exp-k``
→ ``reward.exp_k``); unset flags fall back to ``AUDIO_REWARD_SERVER_*``
environment variables, then the ``--config`` file (TOML or YAML), then the
preset, then defaults; ``-v`` prints each setting with its source.  With ``--ray`` the
same settings are deployed on Ray Serve (:mod:`.ray_serve`, which owns the
scale-out flags).  Only argparse and pydantic are imported here; the server
loads inside the command.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..settings_flags import dotted_items
from .flags import InvalidSettingsError, add_server_flags, settings_from_args
from .scale_out import add_scale_out_flags

if TYPE_CHECKING:
    from .settings import ServerSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the scorer server",
        description="Run the scorer server (speech → ASR → CER/WER → reward). See docs/server.md.",
    )
    add_server_flags(parser)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every setting, with where it came from (flag, env, config file, preset or "
                             "default), and the engine's options at start-up")
    parser.add_argument("--ray", action="store_true",
                        help="scale out on Ray Serve: one replica per GPU behind one URL (needs the 'ray' extra)")
    add_scale_out_flags(parser.add_argument_group("Ray Serve (with --ray)"))
    parser.set_defaults(func=serve)


def _missing_extras(settings: ServerSettings) -> tuple[list[str], ModuleNotFoundError | None]:
    """The extras ``serve`` needs that are not installed: the server's, the engine's, then the model's."""
    from audio_reward.extras import is_missing_dependency

    from .engines.model_store import PACKAGED_EXTRAS, missing_packaged_model
    from .engines.registry import ENGINE_EXTRAS, missing_engine_module

    missing: list[str] = []
    error: ModuleNotFoundError | None = None
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401

        from .app import build_app  # noqa: F401
    except ModuleNotFoundError as exc:
        if not is_missing_dependency(exc):
            raise
        missing, error = ["server"], exc
    absent = missing_engine_module(settings.engine)  # None for an engine without a known extra
    if absent is not None and ENGINE_EXTRAS[settings.engine] not in missing:
        missing.append(ENGINE_EXTRAS[settings.engine])
        error = error or absent
    if missing_packaged_model(settings.model) and PACKAGED_EXTRAS[settings.model][0] not in missing:
        missing.append(PACKAGED_EXTRAS[settings.model][0])
    return missing, error


def _unreachable_model(settings: ServerSettings) -> str | None:
    """Why the model cannot be had (a local folder that is not there, a hub model with no local copy and no hub),
    checked before the server starts; None if it can."""
    from .engines.model_store import ModelNotAvailableError, ensure_hub_model, hub_repository, missing_model_folder

    missing = missing_model_folder(settings.model)
    repo = hub_repository(settings.engine, settings.model)  # None for a local path, missing or not
    if missing is not None or repo is None:
        return missing
    try:
        ensure_hub_model(repo, settings.model)
    except ModelNotAvailableError as exc:
        return str(exc)
    return None


def _language_the_model_lacks(settings: ServerSettings) -> str | None:
    """Why ``--language`` cannot be decoded by an English-only Whisper (a model named ``*.en``), or None.

    Known from the name before anything loads; a model that does not say so by its name is checked
    once it has loaded (:meth:`EngineClient.load`), where the server then stops with one line.
    """
    from pathlib import PurePath

    from audio_reward.scoring import language_code

    language = language_code(settings.language)
    if language is None or language == "en" or not PurePath(settings.model.rstrip("/")).name.endswith(".en"):
        return None
    return (f"--language {settings.language}: model {settings.model} is English-only; pass --language en (or "
            "none), or a multilingual model (--model base)")


def _missing_device(settings: ServerSettings) -> str | None:
    """Why ``--device cuda`` cannot be honoured on this machine (no GPU the engine's library sees), or None.

    Without this check the server says where it listens, then the background load fails with the
    library's traceback ("CUDA driver version is insufficient...").
    """
    from .devices import CUDA_PROBES, cuda_devices

    library = CUDA_PROBES.get(settings.engine)
    if library is None or not settings.device.startswith("cuda"):
        return None
    try:
        if cuda_devices(library) > 0:
            return None
    except (ImportError, RuntimeError, AttributeError) as exc:
        return f"--device {settings.device}: {library} cannot look for a CUDA device ({exc}); pass --device cpu"
    return (f"--device {settings.device}: {library} (engine {settings.engine}) sees no CUDA device on this machine "
            "(no GPU, or its driver is missing or too old); pass --device cpu, or --device auto to use a GPU "
            "where there is one")


def _port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be bound now (another server holds it), or None; checked before anything loads.

    uvicorn would find out only after the model loaded, with a log line and exit 3.
    """
    import socket

    if port == 0:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server holds it? pass --port)"
    return None


def _source_of(name: str, sources: Mapping[str, str]) -> str:
    """Where setting ``name`` came from; an entry of a mapping setting (``engine_options.batched``) by the whole."""
    parts = name.split(".")
    return next((sources[key] for key in (".".join(parts[:cut]) for cut in range(len(parts), 0, -1))
                 if key in sources), "default")


def _print_lines(prefix: str, values: Mapping[str, Any], *, empty: str | None = None,
                 sources: Mapping[str, str] | None = None) -> None:
    """``values`` one ``audio-reward serve: name = value`` line each (nested ones by their dotted name), sorted,
    as the client's commands print theirs with ``-v``; with ``sources``, each line ends with where its value
    came from (``(flag --port)``, ``(env AUDIO_REWARD_SERVER_PORT)``, ``(config serve.toml)``, ``(default)``)."""
    import json

    if not values and empty is not None:
        print(f"audio-reward serve: {empty}", flush=True)
    for name, value in dotted_items(values):
        shown = value if isinstance(value, str) else json.dumps(value)
        source = "" if sources is None else f"  ({_source_of(name, sources)})"
        print(f"audio-reward serve: {prefix}{name} = {shown}{source}", flush=True)


def serve(args: argparse.Namespace) -> int:
    from audio_reward.extras import missing_extra_message

    try:
        settings = settings_from_args(args)
    except InvalidSettingsError as exc:
        print(f"audio-reward serve: {exc}", file=sys.stderr)
        return 2
    missing, error = _missing_extras(settings)
    if missing:  # one line before anything starts, not a traceback from an import or the background load
        print(missing_extra_message(missing, "audio-reward serve:", error), file=sys.stderr)
        return 2
    # With --ray the GPUs are the Ray workers' and the port is Ray Serve's proxy's, not necessarily this machine's.
    if unusable := (_unreachable_model(settings) or _language_the_model_lacks(settings)
                    or (None if args.ray else _missing_device(settings) or _port_taken(settings.host, settings.port))):
        print(f"audio-reward serve: {unusable}", file=sys.stderr)
        return 2

    from .app import build_app
    from .devices import pick_device
    from .flags import server_overrides
    from .http.server import ForegroundServer, uvicorn_config
    from .settings import setting_sources

    if args.ray:
        from .ray_serve import deploy_from_args

        return deploy_from_args(settings, args)
    # auto resolved before the engine is built, so that the start-up line says what it picked and why (a Ray
    # Serve replica resolves it on its own machine, in engine_from_settings)
    device = pick_device(settings.engine, settings.device)
    given_device, settings = settings.device, settings.model_copy(update={"device": device.device})
    if args.verbose:
        sources = setting_sources(server_overrides(args), args.config)
        if device.device != given_device:
            sources["device"] = f"{sources.get('device', 'default')}: {given_device}, resolved"
        _print_lines("", settings.describe(), sources=sources)
    try:
        app = build_app(settings)
    except (ImportError, ValueError) as exc:
        print(f"audio-reward serve: {exc}", file=sys.stderr)
        return 2
    parts = app.state.parts
    if args.verbose:
        _print_lines("engine option ", parts.engine_client.options, empty="engine options: none")
    server = ForegroundServer(uvicorn_config(app, settings))

    def stop() -> None:
        server.should_exit = True

    parts.on_fatal = stop
    started = time.monotonic()
    url = f"http://{settings.host}:{settings.port}"

    def ready() -> None:
        # The load takes seconds to minutes (the signal models): say when it is over, not only how to ask.
        print(f"audio-reward serve: ready on {url} after {time.monotonic() - started:.0f} s", flush=True)

    parts.on_ready = ready
    # What the engine says it serves, as /v1/info will: an engine registered in-process (the instant engine of
    # the tests and the toy loop) has a model of its own, not the --model default.
    info = parts.engine_client.info
    print(f"audio-reward serve: listening on {url} "
          f"(engine {info.engine}, model {info.model_id}, device {device.describe()}); "
          "ready when /readyz answers 200", flush=True)
    server.run()
    if server.stop_signal is not None:
        print(f"audio-reward serve: stopped on {signal.Signals(server.stop_signal).name}", file=sys.stderr)
    if load_error := parts.engine_client.state.load_error:
        print(f"audio-reward serve: the model failed to load ({load_error}); the error is logged above",
              file=sys.stderr)
        return 1
    return 0
