"""``audio-reward serve``: run the scorer server under uvicorn.

Every flag overrides the matching setting of :class:`ServerSettings`
(``--max-batch-size`` → ``max_batch_size``); unset flags fall back to
``AUDIO_REWARD_*`` environment variables, then the preset, then defaults.
Only argparse is imported here; the server loads inside the command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

# (flag, type, help).  Defaults live in ServerSettings alone; a flag left out is None and ignored.
FLAGS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("host", str, "interface to bind (default 127.0.0.1)"),
    ("port", int, "TCP port (default 8000)"),
    ("preset", str, "named preset: seed-tts-eval-en, qwen3-asr, fast-en"),
    ("engine", str, "faster-whisper (default), transformers or vllm"),
    ("model", str, "tiny.en (default), base, a CTranslate2 folder or a hub id"),
    ("device", str, "cpu (default), cuda or auto"),
    ("compute-type", str, "engine compute type: default, int8, float16, ..."),
    ("cpu-threads", int, "engine threads; 0 lets the engine choose"),
    ("beam-size", int, "1 (default) is greedy decoding"),
    ("served-model-name", str, "model id clients of /v1/audio/transcriptions send (default: the model's id)"),
    ("max-batch-size", int, "most utterances per engine call (default 16)"),
    ("max-wait-ms", float, "how long an idle engine waits for arriving requests to join its batch (default 10)"),
    ("max-batch-audio-s", float, "most seconds of audio per engine batch (default: no bound)"),
    ("max-batches-in-flight", int, "engine batches taken at once, the next one's features overlap (default 2 on GPU, 1 on CPU)"),
    ("max-queue", int, "utterances waiting before new requests get 429 (default 512)"),
    ("max-audio-seconds", float, "longest accepted utterance (default 60)"),
    ("max-body-bytes", int, "largest accepted request body (default 64 MiB)"),
    ("max-batch-items", int, "most items per batch request (default 256)"),
    ("request-timeout-s", float, "504 after this many seconds (default 120)"),
    ("shutdown-grace-s", float, "time given to requests in flight on shutdown (default 30)"),
    ("dedup-cache-size", int, "answers kept by request id so a retry is scored once; 0 turns off (default 4096)"),
    ("dedup-ttl-s", float, "how long a retry with the same request id gets the kept answer (default 600)"),
    ("dedup-cache-bytes", int, "bytes the kept transcripts may take (default 16 MiB)"),
    ("max-prompt-chars", int, "longest accepted prompt in characters (default 10000)"),
    ("max-metadata-keys", int, "most metadata keys per request (default 128)"),
    ("max-metadata-key-chars", int, "longest metadata key (default 256)"),
    ("max-metadata-value-chars", int, "longest metadata string value (default 10000)"),
    ("max-audio-bytes", int, "decoded float32 bytes of one item, checked before decoding (default 64 MiB)"),
    ("max-batch-audio-bytes", int, "decoded float32 bytes of one batch's items together (default 256 MiB)"),
    ("max-header-bytes", int, "largest request line plus headers; more gets 431 (default 64 KiB)"),
    ("header-timeout-s", float, "time to send a request's headers, then 408 and close (default 10)"),
    ("body-timeout-s", float, "time to send a request's body, then 408 and close (default 60)"),
    ("keep-alive-timeout-s", float, "idle keep-alive connections close after this (default 5)"),
    ("max-connections", int, "connections or requests in flight at which new requests get 503 (default: no limit)"),
    ("api-key-file", str, "file whose first line is the API key (or set AUDIO_REWARD_API_KEY)"),
    ("normalizer", str, "text normalizer: basic (default), seed-tts-eval, whisper-en"),
    ("language", str, "default language code when a request names none"),
    ("reward-formula", str, "1-cer (default), exp or tanh"),
    ("reward-metric", str, "cer (default) or wer"),
    ("exp-k", float, "k of the exp formula (default 2.5)"),
    ("error-clip", float, "error rates are clipped to this before the formula (default 1)"),
    ("empty-transcript-penalty", float, "penalty for an empty transcript"),
    ("duration-ratio-min", float, "lower bound of the accepted duration ratio"),
    ("duration-ratio-max", float, "upper bound of the accepted duration ratio"),
    ("duration-penalty", float, "penalty outside the duration-ratio range"),
    ("min-duration-s", float, "audio shorter than this gets the short-audio penalty"),
    ("short-audio-penalty", float, "penalty for audio shorter than min-duration-s"),
    ("repeat-ngram-n", int, "n of the repeated n-gram check"),
    ("repeat-penalty", float, "penalty scaled by the share of repeated n-grams"),
    ("log-level", str, "debug, info, warning (default) or error"),
)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "serve",
        help="run the scorer server",
        description="Run the scorer server (speech → ASR → CER/WER → reward). See docs/server.md.",
    )
    for flag, kind, text in FLAGS:
        parser.add_argument(f"--{flag}", type=kind, default=None, help=text)
    parser.add_argument("--log-json", action=argparse.BooleanOptionalAction, default=None,
                        help="one JSON object per log line")
    parser.add_argument("--engine-option", action="append", default=None, metavar="KEY=VALUE",
                        help="engine-specific option, repeatable (e.g. max_num_seqs=128 for vllm); see docs/server.md")
    parser.add_argument("--ray", action="store_true",
                        help="scale out on Ray Serve: one replica per GPU behind one URL (needs audio-reward[ray])")
    from .ray_serve import add_scale_out_arguments

    add_scale_out_arguments(parser.add_argument_group("Ray Serve (with --ray)"))
    parser.set_defaults(func=serve)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The settings fields given on the command line."""
    names = [flag.replace("-", "_") for flag, _, _ in FLAGS] + ["log_json"]
    out = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    if getattr(args, "engine_option", None):
        from .settings import parse_engine_options

        out["engine_options"] = parse_engine_options(args.engine_option)
    return out


def _missing_extras(args: argparse.Namespace) -> tuple[list[str], ModuleNotFoundError | None]:
    """The extras ``serve`` needs that are not installed: the server's, then the model's."""
    import os

    from audio_reward.extras import is_missing_dependency

    from .engines.model_store import PACKAGED_EXTRAS, missing_packaged_model

    missing: list[str] = []
    error: ModuleNotFoundError | None = None
    try:
        import fastapi  # noqa: F401
        import pydantic_settings  # noqa: F401
        import uvicorn  # noqa: F401

        from .app import build_app  # noqa: F401
    except ModuleNotFoundError as exc:
        if not is_missing_dependency(exc):
            raise
        missing, error = ["server"], exc
    model = args.model or os.environ.get("AUDIO_REWARD_MODEL") or "tiny.en"
    if missing_packaged_model(model) and PACKAGED_EXTRAS[model][0] not in missing:
        missing.append(PACKAGED_EXTRAS[model][0])
    return missing, error


def serve(args: argparse.Namespace) -> int:
    import json

    from audio_reward.extras import install_command

    missing, error = _missing_extras(args)
    if missing:  # one line before anything starts, not a traceback from an import or the background load
        names = " and ".join(f"'{m}'" for m in missing)
        why = f" (no module named {error.name!r})" if error is not None else ""
        print(f"audio-reward serve: needs the {names} extra{'s' if len(missing) > 1 else ''}{why}: "
              f"run {install_command(','.join(missing))} in your audio-reward checkout", file=sys.stderr)
        return 2

    import uvicorn
    from pydantic import ValidationError

    from .app import build_app
    from .http_server import uvicorn_config
    from .logs import configure_logging
    from .settings import ServerSettings

    try:
        settings = ServerSettings(**overrides_from_args(args))
    except (ValidationError, ValueError) as exc:
        print(f"audio-reward serve: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, json_lines=settings.log_json)
    if args.ray:
        from .ray_serve import run_from_args

        return run_from_args(args)
    print("audio-reward serve settings: " + json.dumps(settings.describe(), sort_keys=True), flush=True)
    try:
        app = build_app(settings)
    except (ImportError, ValueError) as exc:
        print(f"audio-reward serve: {exc}", file=sys.stderr)
        return 2
    print("audio-reward serve engine options: " + json.dumps(dict(app.state.scorer.engine.options), sort_keys=True),
          flush=True)
    config = uvicorn_config(app, settings)
    server = uvicorn.Server(config)
    state = app.state.scorer

    def stop() -> None:
        server.should_exit = True

    state.on_fatal = stop
    print(f"audio-reward serve: listening on http://{settings.host}:{settings.port} "
          f"(engine {settings.engine}, model {settings.model}); ready when /readyz answers 200", flush=True)
    server.run()
    if state.load_error:
        print(f"audio-reward serve: the model failed to load ({state.load_error}); the error is logged above",
              file=sys.stderr)
        return 1
    return 0
