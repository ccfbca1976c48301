"""Protocol v1 of audio-reward: wire models, codecs and validation.

Depends on pydantic, numpy, orjson and pybase64 only, so trainers, servers
and tools in any environment can import it.
"""

from .audio import read_audio
from .codecs import (
    AudioDecodeError,
    as_float32_mono,
    decode_f32,
    decode_pcm16,
    describe_bytes,
    encode_f32,
    encode_file,
    encode_pcm16,
)
from .errors import Issue, ProtocolError
from .models import (
    DEFAULT_LIMITS,
    MESSAGES,
    BatchItem,
    BatchScoreRequest,
    BatchScoreResponse,
    ErrorDetail,
    ErrorResponse,
    InfoResponse,
    Limits,
    ScoreRequest,
    ScoreResponse,
    SpeakerRequest,
    SpeakerResponse,
    is_finite_scalar,
)
from .reward import RewardOptions, RewardPolicy
from .validation import (
    DecodedAudio,
    DecodedScoreRequest,
    decode_batch_request,
    decode_score_request,
    decode_speaker_request,
    detect_kind,
    issues_from_pydantic,
    parse_json,
    validate_message,
)
from .version import PROTOCOL_VERSION, SUPPORTED_VERSIONS

__all__ = [
    "DEFAULT_LIMITS",
    "MESSAGES",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "AudioDecodeError",
    "BatchItem",
    "BatchScoreRequest",
    "BatchScoreResponse",
    "DecodedAudio",
    "DecodedScoreRequest",
    "ErrorDetail",
    "ErrorResponse",
    "InfoResponse",
    "Issue",
    "Limits",
    "ProtocolError",
    "RewardOptions",
    "RewardPolicy",
    "ScoreRequest",
    "ScoreResponse",
    "SpeakerRequest",
    "SpeakerResponse",
    "as_float32_mono",
    "decode_batch_request",
    "decode_f32",
    "decode_pcm16",
    "decode_score_request",
    "decode_speaker_request",
    "describe_bytes",
    "detect_kind",
    "encode_f32",
    "encode_file",
    "encode_pcm16",
    "is_finite_scalar",
    "issues_from_pydantic",
    "parse_json",
    "read_audio",
    "validate_message",
]
