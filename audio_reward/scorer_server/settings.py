"""The scorer server's settings: :class:`~.config.ServerConfig` read from the environment too.

Precedence, highest first: explicit CLI flags (generated from the fields by
:mod:`audio_reward.settings_flags`), ``AUDIO_REWARD_SERVER_*`` environment
variables, the named ``preset``'s fields, the defaults.  The reward policy is
one nested field, ``reward``: flags ``--reward-exp-k``..., variables
``AUDIO_REWARD_SERVER_REWARD__EXP_K``... (or the whole policy as JSON in
``AUDIO_REWARD_SERVER_REWARD``).  The API key comes from
``AUDIO_REWARD_API_KEY``, the name the client reads too
(``AUDIO_REWARD_SERVER_API_KEY`` wins when both are set), or from a file
(``--api-key-file``, which wins over both), never from a flag, so it stays
out of shell history and ``ps``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ..environment import API_KEY_ENV
from .config import ENV_PREFIX, ServerConfig, parse_engine_options

__all__ = ["API_KEY_ENV", "ENV_PREFIX", "ServerConfig", "ServerSettings", "parse_engine_options"]


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
