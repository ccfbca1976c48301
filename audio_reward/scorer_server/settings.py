"""The scorer server's settings: :class:`~.config.ServerConfig` read from the environment and a file too.

Precedence, highest first: explicit CLI flags (generated from the fields by
:mod:`audio_reward.settings_flags`), ``AUDIO_REWARD_SERVER_*`` environment
variables, the config file (``--config FILE``, TOML or YAML, read by
pydantic-settings' own file sources, then an init source over its values), the named
``preset``'s fields, the defaults.  A file's keys are the flags' names
(``max-batch-size``, ``reward-exp-k``, ``engine-option``) or the fields'
(``max_batch_size``, a ``[reward]`` table, ``engine_options``).
:func:`setting_sources` says where each setting came from.  The reward policy is
one nested field, ``reward``: flags ``--reward-exp-k``..., variables
``AUDIO_REWARD_SERVER_REWARD__EXP_K``... (or the whole policy as JSON in
``AUDIO_REWARD_SERVER_REWARD``).  The API key comes from
``AUDIO_REWARD_API_KEY``, the name the client reads too
(``AUDIO_REWARD_SERVER_API_KEY`` wins when both are set), or from a file
(``--api-key-file``, which wins over both), never from a flag, so it stays
out of shell history and ``ps``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from ..environment import API_KEY_ENV
from ..settings_flags import flags_for, one_line, set_path
from .config import ENV_PREFIX, PRESET_FIELDS, ServerConfig, parse_engine_options

CONFIG_FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML"}
"""The config file's format, by its suffix."""

_CONFIG_FILE: ContextVar[Path | None] = ContextVar("audio_reward_server_config_file", default=None)
"""The ``--config`` file of the settings being built (:meth:`ServerSettings.load`): pydantic-settings asks the
class, not the instance, for its sources."""


class ConfigFileError(ValueError):
    """A ``--config`` file that cannot be used (missing, not TOML or YAML, an unknown key); the message is one line."""


def _keys() -> dict[str, tuple[str, ...]]:
    """Every key a config file may hold, underscored, to the field path it sets: each flag's name (the nested
    ``reward-exp-k`` too), each field's, and ``engine-option``."""
    keys = {flag.option[2:].replace("-", "_"): flag.path for flag in flags_for(ServerConfig)}
    keys |= {name: (name,) for name in ServerConfig.model_fields}
    keys["engine_option"] = ("engine_options",)
    return keys


def _unknown(path: Path, key: str, known: list[str]) -> ConfigFileError:
    close = difflib.get_close_matches(key.replace("-", "_"), known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else "; its keys are the flags of audio-reward serve --help"
    return ConfigFileError(f"--config {path}: unknown setting {key!r}{hint}")


def config_values(raw: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """A config file's settings, nested as the settings' fields; an unknown key raises :class:`ConfigFileError`.

    The API key is refused: a config file is often shared or committed; ``api_key_file`` names a file that
    holds it, as ``--api-key-file`` does.
    """
    keys = _keys()
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        if name == "api_key":
            raise ConfigFileError(f"--config {path}: the API key is not read from a config file; name the file "
                                  "that holds it (api_key_file), or set AUDIO_REWARD_API_KEY")
        if name == "reward" and isinstance(value, Mapping):  # a [reward] table: its keys as the policy's fields
            for sub, sub_value in value.items():
                set_path(out, ("reward", str(sub).replace("-", "_")), sub_value)
            continue
        if name not in keys:
            raise _unknown(path, str(key), sorted(keys))
        if name == "engine_option":  # the flag's form: KEY=VALUE words
            value = parse_engine_options([value] if isinstance(value, str) else value)
        set_path(out, keys[name], value)
    return out


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings of a TOML or YAML file (by its suffix), read by pydantic-settings' own file source.

    pydantic-settings skips a file that is not there; here that, a suffix of neither format, and text that
    does not parse raise :class:`ConfigFileError` in one line.
    """
    kind = CONFIG_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise ConfigFileError(f"--config {path}: a .toml, .yaml or .yml file, please (the format is told by "
                              "its suffix)")
    if not path.is_file():
        raise ConfigFileError(f"--config {path}: no such file")
    try:
        raw = (TomlConfigSettingsSource(ServerSettings, toml_file=path).toml_data if kind == "TOML"
               else YamlConfigSettingsSource(ServerSettings, yaml_file=path).yaml_data)
    except ImportError:
        raise ConfigFileError(f"--config {path}: reading {kind} needs {'PyYAML' if kind == 'YAML' else 'tomli'}, "
                              "which the server extra installs (pip install -e '.[server]')") from None
    except Exception as exc:  # noqa: BLE001 - tomllib, PyYAML and the OS each raise their own errors
        raise ConfigFileError(f"--config {path}: not a {kind} table of settings: {one_line(exc)}") from None
    if not isinstance(raw, Mapping):
        raise ConfigFileError(f"--config {path}: the file must hold a table of settings, got {type(raw).__name__}")
    return config_values(raw, path)


class ServerSettings(BaseSettings, ServerConfig):
    """:class:`ServerConfig` with ``AUDIO_REWARD_SERVER_*`` variables under the explicit values."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="ignore",
                                      validate_default=True, populate_by_name=True)

    # Re-declared for the environment only: a KEY=VALUE list is not JSON, and the key has its shared name.
    engine_options: Annotated[dict[str, Any], NoDecode] = Field(
        default_factory=dict, description=ServerConfig.model_fields["engine_options"].description)
    api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices(f"{ENV_PREFIX}API_KEY", API_KEY_ENV),
        description=ServerConfig.model_fields["api_key"].description)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """pydantic-settings' sources, highest first, with the ``--config`` file last: flags > env > file."""
        path = _CONFIG_FILE.get()
        # The --config file as pydantic-settings' init source over its values: below the flags and the environment.
        extra = (InitSettingsSource(settings_cls, read_config_file(path)),) if path is not None else ()
        return (init_settings, env_settings, dotenv_settings, file_secret_settings, *extra)

    @classmethod
    def load(cls, values: Mapping[str, Any] | None = None, config_file: Path | None = None) -> ServerSettings:
        """The settings from ``values`` (the flags given), the environment, ``config_file`` and the defaults."""
        token = _CONFIG_FILE.set(config_file)
        try:
            return cls(**dict(values or {}))
        finally:
            _CONFIG_FILE.reset(token)


def _paths(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The field paths ``values`` sets, nested ones to their leaves (``reward.exp_k``)."""
    for name, value in values.items():
        if name == "reward" and isinstance(value, Mapping):
            yield from _paths(value, (*prefix, name))
        else:
            yield (*prefix, name)


def _env_names(path: tuple[str, ...], environ: Mapping[str, str]) -> str:
    """The variable that set ``path``: its own, else the whole reward policy's; the API key by its alias."""
    names = {name.upper() for name in environ}
    if path == ("api_key",):
        return next(n for n in (f"{ENV_PREFIX}API_KEY", API_KEY_ENV) if n in names)
    own = ENV_PREFIX + "__".join(path).upper()
    return own if own in names else ENV_PREFIX + path[0].upper()


def setting_sources(values: Mapping[str, Any] | None = None, config_file: Path | None = None,
                    environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each setting given came from, by dotted name: ``flag --max-batch-size``, ``env
    AUDIO_REWARD_SERVER_MAX_BATCH_SIZE``, ``config FILE``, ``preset NAME``; absent names are the defaults.

    Read from the same sources the settings are built from (the flags' ``values``, pydantic-settings'
    environment source, the config file), in their precedence.
    """
    environ = os.environ if environ is None else environ
    options = {flag.path: flag.option for flag in flags_for(ServerConfig)}
    options |= {("engine_options",): "--engine-option", ("served_model_name",): "--served-model-name"}
    values = values or {}
    env = EnvSettingsSource(ServerSettings)()
    env = {("api_key" if key.upper() in (f"{ENV_PREFIX}API_KEY", API_KEY_ENV) else key): v for key, v in env.items()}
    in_file = read_config_file(config_file) if config_file is not None else {}
    out: dict[str, str] = {}
    for paths, label in ((_paths(values), lambda p: f"flag {options.get(p, '--' + '-'.join(p))}"),
                         (_paths(env), lambda p: f"env {_env_names(p, environ)}"),
                         (_paths(in_file), lambda p: f"config {config_file}")):
        for path in paths:
            out.setdefault(".".join(path), label(path))
    if preset := values.get("preset") or env.get("preset") or in_file.get("preset"):
        for name in PRESET_FIELDS:
            out.setdefault(name, f"preset {preset}")
    if "api_key_file" in out:
        out["api_key"] = "api_key_file"
    return out
