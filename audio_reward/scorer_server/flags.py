"""The scorer's command-line flags, generated from :class:`~.config.ServerConfig`.

Shared by ``audio-reward serve`` (:mod:`.cli`) and ``python -m
audio_reward.scorer_server.ray_serve``.  Every field has its flag
(:mod:`audio_reward.settings_flags`) except three: ``engine_options`` is
``--engine-option KEY=VALUE``, repeated, ``served_model_name`` takes one or
more names after one flag (``--served-model-name whisper-1 tiny``, as ``vllm
serve`` takes them), and ``api_key`` has none, so a key
never shows in shell history or ``ps`` (``--api-key-file`` or
``AUDIO_REWARD_API_KEY`` give it).  Only argparse and pydantic are imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audio_reward.settings_flags import Flag, add_flags, flags_for, one_line, values_from_args

from .config import ServerConfig, parse_engine_options

if TYPE_CHECKING:
    from .settings import ServerSettings

NOT_FLAGS = ("api_key", "engine_options", "served_model_name")


def server_flags() -> list[Flag]:
    """One flag per settings field but :data:`NOT_FLAGS`."""
    return flags_for(ServerConfig, skip=NOT_FLAGS)


def add_server_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="settings file, TOML (.toml) or YAML (.yaml, .yml): the flags' names as keys "
                             "(max-batch-size = 32, [reward] exp-k = 2.5); flags and AUDIO_REWARD_SERVER_* "
                             "variables win over it, and it over the defaults")
    add_flags(parser, server_flags())
    parser.add_argument("--engine-option", action="append", default=None, metavar="KEY=VALUE",
                        help="engine-specific option, repeatable (e.g. max_num_seqs=128 for vllm); see docs/server.md")
    parser.add_argument("--served-model-name", nargs="+", default=None, metavar="NAME",
                        help="model id(s) of the OpenAI-compatible API, e.g. whisper-1: /v1/models lists them all and "
                             "a request may name any, the first is the main one (default: the model's own id)")


def server_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings fields given on the command line, nested like the settings (``{"reward": {...}}``)."""
    out = values_from_args(args, server_flags())
    if getattr(args, "engine_option", None):
        out["engine_options"] = parse_engine_options(args.engine_option)
    if getattr(args, "served_model_name", None):
        out["served_model_name"] = args.served_model_name
    return out


class InvalidSettingsError(ValueError):
    """The command line and environment give settings that do not validate; the message says why.

    Commands print it after their name and exit 2.
    """


def describe_invalid(exc: Exception, sources: Mapping[str, str] | None = None) -> str:
    """Why settings do not validate, in one line naming each setting by its flag and the value given.

    pydantic's own text spans several lines with its type codes and a documentation link for each error;
    a user wants the flag to change and why (``--max-audio-seconds -1.0: input should be greater than 0``).
    A value that came from the config file (``sources``, :func:`~.settings.setting_sources`) is named there
    instead (``max_audio_seconds = -1.0 in serve.toml: ...``).
    """
    options = {flag.path: flag.option for flag in server_flags()}

    def describe(loc: tuple[str, ...], reason: str, given: Any) -> str:
        option = options.get(loc)
        if option is None:  # a check across fields (an unknown preset, a reward policy): its message says what
            return reason
        value = f" {given}" if isinstance(given, (str, int, float)) and not isinstance(given, bool) else ""
        source = (sources or {}).get(".".join(loc), "")
        where = (f"{'.'.join(loc)} ={value} in {source.removeprefix('config ')}" if source.startswith("config ")
                 else f"{option}{value}")
        return f"{where}: {reason[:1].lower()}{reason[1:]}"

    return one_line(exc, describe)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """The settings the command line gives, over the environment, with logging configured from them.

    Raises :class:`InvalidSettingsError` (``invalid settings:`` and the reasons) when they do not validate.
    """
    from pydantic import ValidationError

    from .logs import configure_logging
    from .settings import ServerSettings, setting_sources

    given, config_file = server_overrides(args), getattr(args, "config", None)
    try:
        settings = ServerSettings.load(given, config_file)
    except ValidationError as exc:
        reasons = describe_invalid(exc, setting_sources(given, config_file))
        raise InvalidSettingsError(f"invalid settings: {reasons}") from exc
    except ValueError as exc:  # the config file itself (ConfigFileError), an unknown preset
        raise InvalidSettingsError(f"invalid settings: {describe_invalid(exc)}") from exc
    configure_logging(settings.log_level, json_lines=settings.log_json, access_log=settings.access_log_on)
    return settings
