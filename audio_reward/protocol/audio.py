"""The one audio reader: an audio file (a path or its bytes) or raw samples to mono float32 and a rate.

libsndfile reads WAV, FLAC, MP3, OGG and AIFF; a :class:`FileDecoder` (FFmpeg through PyAV, where it is
installed) reads what libsndfile does not, such as M4A and WebM.  Sizes are bounded from the header before
any sample is decoded, and a file that declares no length stops at its limit.  The scorer server (score
requests and uploads), the client and the trainer all read audio here, so they take the same files and
refuse empty or non-finite audio with the same words.
"""

from __future__ import annotations

import importlib.util
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .codecs import AudioDecodeError, describe_bytes, frombuffer_f32, frombuffer_pcm16
from .errors import Issue

FILE_FORMATS = "WAV, FLAC, MP3, OGG (Vorbis, Opus), AIFF or another format libsndfile reads"
"""What ``audio_file_base64`` takes with the base install (libsndfile); docs/protocol.md lists the same."""
FFMPEG_FORMATS = "WAV, FLAC, MP3, OGG, M4A, WebM or another format FFmpeg decodes"
"""Every file format libsndfile and FFmpeg read together."""

# libsndfile's SF_COUNT_MAX: what it reports for a FLAC whose STREAMINFO says
# total_samples = 0 (unknown length, written by streaming encoders).
_UNKNOWN_FRAMES = 2**63 - 1


@dataclass(frozen=True)
class FileDecoder:
    """FFmpeg through PyAV, for the files libsndfile does not read; mono float32 at ``rate`` (None: the
    file's own); a file neither reads is told :data:`FFMPEG_FORMATS`."""

    rate: int | None = None

    @staticmethod
    def available() -> bool:
        """Whether PyAV is installed (the scorer server's environment has it; the base install does not)."""
        return importlib.util.find_spec("av") is not None

    def decode(self, raw: bytes, field: str, max_seconds: float | None) -> tuple[np.ndarray, int] | None:
        """Mono float32 samples and their rate, or None when the bytes hold no audio FFmpeg decodes.

        A container that declares a duration over ``max_seconds`` is refused before decoding, and one that
        does not stops at the limit (``audio_too_long``), as libsndfile's path does.
        """
        import av

        try:
            container = av.open(io.BytesIO(raw), mode="r", metadata_errors="ignore")
        except (av.error.FFmpegError, ValueError):
            return None
        with container:
            if not container.streams.audio:
                return None
            if max_seconds is not None and container.duration is not None \
                    and container.duration / av.time_base > max_seconds:
                raise _too_long(field, container.duration / av.time_base, max_seconds)
            rate = self.rate or int(container.streams.audio[0].rate)
            chunks = _decode_stream(container, av, rate, field, max_seconds)
        if chunks is None:
            return None
        return np.ascontiguousarray(np.concatenate(chunks) if chunks else np.zeros(0), dtype=np.float32), rate


def _too_long(field: str, seconds: float, limit: float) -> AudioDecodeError:
    return AudioDecodeError(
        "audio_too_long", f"{field} holds {seconds:.1f} s of audio; the limit is {limit:g} s (max_audio_seconds)")


def _decode_stream(container: Any, av: Any, rate: int, field: str,
                   max_seconds: float | None) -> list[np.ndarray] | None:
    """The first audio stream's samples, mixed down to mono at ``rate``; None when FFmpeg fails at once."""
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    chunks: list[np.ndarray] = []
    samples = 0
    try:
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                samples += chunks[-1].shape[0]
            if max_seconds is not None and samples > max_seconds * rate:  # no duration must not decode an hour
                raise _too_long(field, samples / rate, max_seconds)
        chunks += [out.to_ndarray().reshape(-1) for out in resampler.resample(None)]
    except av.error.FFmpegError:
        return chunks or None  # what was decoded before the error, if anything
    return chunks


@dataclass
class EncodedAudio:
    """Audio bytes after the checks that decode no sample: the encoding, the rate, and the size when known."""

    field: str
    raw: bytes
    rate: int
    channels: int = 1
    frames: int | None = None
    """A file's declared frames per channel; None when it does not say (streamed FLAC)."""
    file: bool = False
    samples: np.ndarray | None = None
    """Already decoded (by a :class:`FileDecoder`, bounded as it decoded)."""

    @property
    def decoded_bytes(self) -> int | None:
        """Bytes of the decoded float32 samples (every channel); None for a file that declares no length."""
        if self.samples is not None:
            return int(self.samples.nbytes)
        if self.file:
            return None if self.frames is None else self.frames * self.channels * 4
        return len(self.raw) * (1 if self.field == "waveform_f32_base64" else 2)

    def decode(self, max_seconds: float | None = None, max_bytes: int | None = None,
               budget: int | None = None) -> np.ndarray:
        """Mono float32 samples; a file of unknown length stops at the limits, or at ``budget`` bytes when that
        is lower (then ``batch_too_large``: the budget is what a batch's other items left)."""
        if self.samples is not None:
            return self.samples
        if not self.file:
            frombuffer = frombuffer_pcm16 if self.field == "waveform_pcm16_base64" else frombuffer_f32
            return frombuffer(self.raw, field=self.field)
        # The lowest cap wins; on a tie the item's own limit is named (its names sort before the batch's).
        caps = [(max_bytes // (self.channels * 4), "max_audio_bytes")] if max_bytes is not None else []
        if max_seconds is not None:
            caps.append((int(max_seconds * self.rate), "max_audio_seconds"))
        if budget is not None and self.frames is None:
            caps.append((budget // (self.channels * 4), "max_batch_audio_bytes"))
        max_frames, limit_name = min(caps) if caps else (None, "the limit")
        try:
            return self._decode_file(max_frames, limit_name)
        except AudioDecodeError as exc:
            if exc.code == "audio_too_long" and limit_name == "max_batch_audio_bytes":
                exc.code = "batch_too_large"
            raise

    def _decode_file(self, max_frames: int | None, limit_name: str) -> np.ndarray:
        import soundfile as sf

        try:
            with sf.SoundFile(io.BytesIO(self.raw)) as f:
                if self.frames is not None:
                    return _mono(f.read(self.frames, dtype="float32", always_2d=True))
                return self._read_unknown_length(f, max_frames, limit_name)
        except AudioDecodeError:
            raise
        except Exception:  # noqa: BLE001 - soundfile raises LibsndfileError, RuntimeError, TypeError…
            # soundfile's own message names the BytesIO object, not the problem: describe the bytes instead.
            raise AudioDecodeError("invalid_audio_file", f"{self.field} cannot be decoded: "
                                   f"{describe_bytes(self.raw)}; send {FILE_FORMATS}") from None

    def _read_unknown_length(self, f: Any, max_frames: int | None, limit_name: str) -> np.ndarray:
        import soundfile as sf

        block = max(1024, self.rate)  # one second per read
        cap = max_frames if max_frames is not None else 2**31
        out = np.empty(cap + 1, dtype=np.float32)  # pages are touched only as samples arrive
        buf = np.empty((block, self.channels), dtype=np.float32)
        total = 0
        while total <= cap:
            want = min(block, cap + 1 - total)
            # soundfile seeks after every read; with no declared length the seek after the last,
            # short read fails although the samples were read.  FLAC decodes integer PCM, never
            # NaN, so a NaN-filled buffer shows how many frames that read delivered.
            buf[:want] = np.nan
            try:
                got = f.read(want, dtype="float32", always_2d=True, out=buf[:want]).shape[0]
                last = got < want
            except sf.LibsndfileError:
                finite = np.isfinite(buf[:want, 0])
                got = want if finite.all() else int(np.argmin(finite))
                last = True
            out[total:total + got] = _mono(buf[:got])
            total += got
            if last:
                break
        if total > cap:
            seconds = cap / self.rate
            raise AudioDecodeError(
                "audio_too_long",
                f"{self.field} has no declared length and holds more than {cap} frames ({seconds:.1f} s) of audio; "
                f"decoding stopped at the limit ({limit_name})",
            )
        return out[:total]


def _mono(data: np.ndarray) -> np.ndarray:
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono, dtype=np.float32)


def _read_header(raw: bytes, field: str, formats: str) -> EncodedAudio:
    """What an audio file libsndfile reads declares (rate, channels, frames), read before any sample."""
    import soundfile as sf

    if not raw:
        raise AudioDecodeError("empty_audio", f"{field} is empty")
    try:
        with sf.SoundFile(io.BytesIO(raw)) as f:
            rate, channels, frames = int(f.samplerate), int(f.channels), int(f.frames)
    except Exception:  # noqa: BLE001 - soundfile raises LibsndfileError, RuntimeError, TypeError…
        # soundfile's own message names the BytesIO object, not the problem: describe the bytes instead.
        raise AudioDecodeError(
            "invalid_audio_file", f"{field} is not an audio file: {describe_bytes(raw)}; send {formats}"
        ) from None
    return EncodedAudio(field, raw, rate, channels, None if frames >= _UNKNOWN_FRAMES else frames, file=True)


def open_file(raw: bytes, *, field: str, max_seconds: float | None = None, max_bytes: int | None = None,
              decoder: FileDecoder | None = None, rates: tuple[int, int] | None = None,
              whose: str = "the file's") -> EncodedAudio:
    """A whole audio file: libsndfile's header, its rate within ``rates`` and its declared size within the
    limits; a file libsndfile does not read goes to ``decoder`` (bounded as it decodes)."""
    try:
        audio = _read_header(raw, field, FFMPEG_FORMATS if decoder else FILE_FORMATS)
    except AudioDecodeError as exc:
        decoded = decoder.decode(raw, field, max_seconds) if decoder and exc.code == "invalid_audio_file" else None
        if decoded is None:
            raise
        samples, rate = decoded
        if max_bytes is not None and samples.nbytes > max_bytes:
            raise AudioDecodeError("audio_too_large", f"{field} decodes to {samples.nbytes} bytes of float32 "
                                   f"samples; the limit is {max_bytes} bytes (max_audio_bytes)") from None
        return EncodedAudio(field, raw, rate, samples=samples, file=True)
    if rates is not None and not rates[0] <= audio.rate <= rates[1]:
        raise AudioDecodeError("invalid_sample_rate",
                               f"{whose} sample rate {audio.rate} Hz is outside {rates[0]}–{rates[1]} Hz")
    if audio.frames is not None and max_seconds is not None and audio.frames / audio.rate > max_seconds:
        raise _too_long(field, audio.frames / audio.rate, max_seconds)
    size = audio.decoded_bytes
    if max_bytes is not None and size is not None and size > max_bytes:
        raise AudioDecodeError("audio_too_large", f"{field} declares {audio.frames} frames x {audio.channels} "
                               f"channels, {size} bytes once decoded to float32; the limit is {max_bytes} bytes "
                               "(max_audio_bytes)")
    return audio


def sample_issues(waveform: np.ndarray, field: str, path: str = "$") -> list[Issue]:
    """What makes decoded audio unusable: no samples, or NaN or infinite ones."""
    if waveform.shape[0] == 0:
        return [Issue("empty_audio", f"{field} holds no samples", path)]
    if bad := int(np.count_nonzero(~np.isfinite(waveform))):
        return [Issue("non_finite_audio", f"{field} holds {bad} NaN or infinite samples", path)]
    return []


def read_audio(source: bytes | str | Path, *, field: str | None = None, max_seconds: float | None = None,
               max_bytes: int | None = None, decoder: FileDecoder | None = None) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of an audio file, named by its path or held in bytes.

    Multi-channel audio is averaged to mono.  ``decoder`` reads what libsndfile does not; the limits bound
    the decoding.  Raises :class:`~audio_reward.protocol.AudioDecodeError` (a ValueError) whose ``code`` is
    the protocol's, naming ``field`` (by default the path).
    """
    raw = source if isinstance(source, bytes) else Path(source).read_bytes()
    name = field or str(source if not isinstance(source, bytes) else "the audio")
    audio = open_file(raw, field=name, max_seconds=max_seconds, max_bytes=max_bytes, decoder=decoder)
    waveform = audio.decode(max_seconds, max_bytes)
    if issues := sample_issues(waveform, name):
        raise AudioDecodeError(issues[0].code, issues[0].message)
    return waveform, audio.rate
