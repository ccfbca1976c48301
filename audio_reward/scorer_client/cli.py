"""``audio-reward score``: score audio files on a scorer server; the connection flags of the client's commands.

Only argparse and pydantic are imported here; the client and its dependencies load when a
command runs.  The connection flags are generated from :class:`~.settings.ClientSettings`'
fields by :mod:`audio_reward.settings_flags` (help from their descriptions); a flag left out falls back to the
``AUDIO_REWARD_CLIENT_*`` variables, then the shared ``AUDIO_REWARD_URL`` /
``AUDIO_REWARD_API_KEY``, then the defaults.  :func:`add_client_options` and
:func:`client_settings` are the pair any command that talks to a scorer uses
(``score``, ``eval``, the Qwen3-TTS recipe's checkpoint evaluation).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, cast

from ..settings_flags import Flag, add_flags, flags_for, one_line, values_from_args

if TYPE_CHECKING:
    from .errors import ScorerError
    from .settings import ClientSettings

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where ``score`` and ``eval`` look for a scorer when neither ``--url`` nor the environment names one."""


def _flags() -> list[Flag]:
    from .settings import ClientSettings

    return flags_for(ClientSettings, skip=["urls"])


def add_client_options(p: argparse.ArgumentParser) -> None:
    """The scorer connection flags: ``--url`` (repeats), then one per other :class:`ClientSettings` field."""
    from .settings import URL_ENVS

    g = p.add_argument_group("scorer connection (defaults: AUDIO_REWARD_CLIENT_* variables, then built-in)")
    g.add_argument("--url", action="append", dest="urls", metavar="URL",
                   help=f"scorer base URL; repeat for several servers (default: ${URL_ENVS[-1]}, else {DEFAULT_URL})")
    add_flags(g, _flags())
    p.add_argument("-v", "--verbose", action="store_true", help="print every setting on stderr before starting")


def client_settings(args: argparse.Namespace) -> ClientSettings:
    """The settings a command runs with: its flags over the environment over the defaults."""
    from .settings import ClientSettings, url_in_environment

    values = values_from_args(args, _flags())
    urls = getattr(args, "urls", None)
    if urls:
        values["urls"] = urls
    elif not url_in_environment():
        values["urls"] = [DEFAULT_URL]
    return ClientSettings(**values)


def command_settings(command: str, args: argparse.Namespace) -> ClientSettings | None:
    """:func:`client_settings`; with ``-v`` printed to stderr one per line, as ``audio-reward serve -v`` prints its own.

    Invalid settings print why and give None: the command exits 2.
    """
    try:
        settings = client_settings(args)
    except ValueError as exc:
        print(f"audio-reward {command}: {one_line(exc)}", file=sys.stderr)
        return None
    if getattr(args, "verbose", False):
        for line in settings.describe().splitlines():
            print(f"audio-reward {command}: {line}", file=sys.stderr)
    return settings


def failure_line(command: str, settings: ClientSettings, error: ScorerError) -> str:
    """The one line a command prints when the scorer gave it nothing to work with, naming what went wrong.

    An unreachable scorer, one that wants an API key, one that answered errors through every retry and
    one that is not a scorer at all need different fixes, so each gets its own words.
    """
    from .errors import ProtocolViolationError, RequestRejectedError, ScorerUnavailableError, TransientServerError
    from .transport import TransportTimeout, is_retryable_status

    where = ", ".join(settings.urls)
    head = f"audio-reward {command}:"
    if isinstance(error, RequestRejectedError) and error.status in (401, 403):
        wanted = "refused the API key" if settings.api_key else "needs an API key"
        return (f"{head} the scorer at {where} {wanted} ({error}); give it with --api-key or "
                "AUDIO_REWARD_CLIENT_API_KEY")
    if isinstance(error, RequestRejectedError) and error.status is not None and is_retryable_status(error.status):
        return f"{head} the scorer at {where} answered but could not serve the request; try again later ({error})"
    if isinstance(error, RequestRejectedError):
        return f"{head} the scorer at {where} refused the request ({error})"
    if isinstance(error, ProtocolViolationError):
        return f"{head} the server at {where} does not answer as a scorer does ({error})"
    cause = error.last_cause if isinstance(error, ScorerUnavailableError) else None
    if isinstance(cause, TransientServerError):
        return f"{head} the scorer at {where} answered errors through every retry ({error})"
    if isinstance(cause, TransportTimeout):
        return f"{head} the scorer at {where} did not answer in time ({error})"
    return f"{head} cannot reach the scorer at {where}: {error}"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    score = subparsers.add_parser("score", help="score audio files against a text on a scorer server",
                                  description="Score audio files: prints the score and diagnostics of each.")
    score.add_argument("files", nargs="+", metavar="FILE",
                       help="audio files: WAV, FLAC, MP3, OGG; M4A, WebM and other FFmpeg formats where PyAV is "
                            "installed (the server environment has it); multi-channel is averaged")
    score.add_argument("--text", required=True, help="the text the speech should say")
    score.add_argument("--language", help="language code of the text, e.g. en")
    score.add_argument("--json", action="store_true", help="one JSON object per file instead of tables")
    add_client_options(score)
    score.set_defaults(func=_score)


def _score(args: argparse.Namespace) -> int:
    """Exit 0 when every file scored, 1 when one failed, 2 on bad usage or when the scorer answered nothing."""
    import json

    from .audio_file import AudioFileError, read_audio
    from .sync_client import ScorerClient
    from .wire import ScoreItem, ScoreResult

    settings = command_settings("score", args)
    if settings is None:
        return 2
    outcomes: dict[str, ScoreResult | ScorerError | str] = {}
    items, names = [], []
    for name in args.files:
        try:
            items.append(ScoreItem(*read_audio(name), args.text, language=args.language))
            names.append(name)
        except AudioFileError as exc:
            outcomes[name] = f"cannot read audio: {exc}"
    if items:
        with ScorerClient(settings=settings) as client:
            outcomes.update(zip(names, client.score_many(items), strict=False))
    failed = 0
    for name in args.files:
        outcome = outcomes[name]
        if isinstance(outcome, ScoreResult):
            row: dict[str, Any] = {"file": name, **outcome.to_dict()}
        else:
            failed += 1
            row = {"file": name, "error": {"type": type(outcome).__name__ if not isinstance(outcome, str)
                                           else "AudioFileError", "message": str(outcome)}}
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            _print_table(row)
    whole = [outcomes[name] for name in names if _whole_scorer_failure(outcomes[name])]
    if names and len(whole) == len(names):  # no file was scored, for a reason of the scorer's, not the files'
        print(failure_line("score", settings, cast("ScorerError", whole[0])), file=sys.stderr)
        return 2
    return 1 if failed else 0


def _whole_scorer_failure(outcome: object) -> bool:
    """A failure that says nothing about the file: the scorer unreachable (or its host unknown), overloaded, or
    wanting an API key."""
    from .errors import RequestRejectedError, ScorerUnavailableError, UnknownHostError

    return isinstance(outcome, (ScorerUnavailableError, UnknownHostError)) or (
        isinstance(outcome, RequestRejectedError) and outcome.status in (401, 403))


def _print_table(row: dict[str, Any]) -> None:
    flat = {k: f"{v['type']}: {v['message']}" if k == "error" else v for k, v in row.items()}
    width = max(len(k) for k in flat)
    for key, value in flat.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {text}")
    print()
