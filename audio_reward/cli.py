"""The ``audio-reward`` command: one entry point, a subcommand per feature.

Each feature module exposes ``register(subparsers)`` that adds its
subcommands with a ``func(args) -> int`` default; modules are imported only
for the command being run, so ``audio-reward validate`` never imports the
server's dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import cast

from . import __version__

# subcommand -> module providing register(subparsers)
COMMANDS: dict[str, str] = {
    "schema": "audio_reward.protocol.cli",
    "validate": "audio_reward.protocol.cli",
    "serve": "audio_reward.scorer_server.cli",
    "score": "audio_reward.scorer_client.cli",
    "eval": "audio_reward.scorer_client.eval.cli",
    "preflight": "audio_reward.trainer_plugin.cli",
    "tts-speaker": "audio_reward.trainer_plugin.tts_speaker",
    "export-checkpoint": "audio_reward.trainer_plugin.checkpoint_export",
    "error-rate": "audio_reward.scoring.cli",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``audio-reward`` parser; with ``only``, just that command's module is imported (a fast ``--help``)."""
    parser = argparse.ArgumentParser(prog="audio-reward", description="Reward scoring for audio RL.")
    parser.add_argument("--version", action="version", version=f"audio-reward {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # each module once (one registers several commands), in COMMANDS' order
    for module in dict.fromkeys(module for name, module in COMMANDS.items() if only is None or name == only):
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``audio-reward`` command; its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse reports a subcommand's unknown flag from the top-level parser, with the top-level usage;
        # the command's own usage is the one that lists the flags the user can use instead.
        (_command_parser(parser, args.command) or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe must surface here, not at interpreter exit
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        # Ctrl-C: the shell's status for SIGINT in one line, not a traceback through asyncio (a command with
        # more to say, such as eval's rows kept, catches it first).
        print(f"audio-reward {args.command}: interrupted", file=sys.stderr)
        return SIGINT_STATUS
    return status


def _command_parser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of subcommand ``name``; argparse keeps no public handle on it, so its action is looked up."""
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and name in choices:
            return cast(argparse.ArgumentParser, choices[name])
    return None


SIGINT_STATUS = 128 + 2
"""What a shell reports for a command stopped by Ctrl-C, as for one killed by SIGINT."""

SIGPIPE_STATUS = 128 + 13
"""What a shell reports for a command whose output pipe closed (``| head``), as for one killed by SIGPIPE."""


def _reader_gone() -> int:
    """The reader of stdout has left (``audio-reward score ... | head``): stop quietly, as a shell tool does.

    Python would otherwise print a BrokenPipeError traceback, and another when it flushes stdout at exit;
    pointing stdout at the null device leaves that last flush nothing to fail on.
    """
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
