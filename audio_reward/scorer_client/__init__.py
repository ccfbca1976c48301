"""Client SDK of audio-reward: score candidates on a scorer server.

- :class:`AsyncScorerClient`: asyncio, one pooled session, retries, batching.
- :class:`ScorerClient`: the same API for synchronous and threaded code.
- :func:`read_audio`: an audio file as mono float32 samples and its rate (``score_file`` reads with it).

Failures are :class:`ScorerError` subclasses; see :mod:`.errors`.
:class:`RewardOptions` (the ``reward=`` argument) is the protocol's, re-exported here. verl-omni's
``compute_score`` signature is the trainer plugin's (:mod:`audio_reward.trainer_plugin.verl_omni_score`): it
reads rollout rows, which the SDK knows nothing of.
"""

from ..protocol import RewardOptions
from .async_client import AsyncScorerClient
from .audio_file import AudioFileError, read_audio
from .errors import (
    AudioTooLongError,
    DeadlineExceededError,
    InvalidInputError,
    InvalidURLError,
    ProtocolViolationError,
    RequestRejectedError,
    ScorerError,
    ScorerUnavailableError,
    TransientServerError,
    UnknownHostError,
    UnsupportedProtocolError,
)
from .settings import ClientSettings
from .sync_client import ScorerClient
from .wire import ScoreItem, ScoreOptions, ScoreResult, sanitize_metadata

__all__ = [
    "AsyncScorerClient",
    "AudioFileError",
    "AudioTooLongError",
    "ClientSettings",
    "DeadlineExceededError",
    "InvalidInputError",
    "InvalidURLError",
    "ProtocolViolationError",
    "RequestRejectedError",
    "RewardOptions",
    "ScoreItem",
    "ScoreOptions",
    "ScoreResult",
    "ScorerClient",
    "ScorerError",
    "ScorerUnavailableError",
    "TransientServerError",
    "UnknownHostError",
    "UnsupportedProtocolError",
    "read_audio",
    "sanitize_metadata",
]
