"""Speaker embeddings: who is speaking, as a unit vector, so that two recordings compare by cosine.

Engines (the ``speaker_model`` setting):

- ``resemblyzer``: the GE2E encoder that PyPI's ``resemblyzer`` 0.1.4 ships
  (``pretrained.pt``, 256 dimensions), offline.  Each utterance gets resemblyzer's
  own preprocessing (volume normalisation, long silences trimmed by WebRTC VAD)
  and is cut into its 1.6 s partials; the partials of the whole batch go through
  the LSTM in one call and each utterance's embedding is the normalised mean of
  its own, as ``VoiceEncoder.embed_utterance`` computes it one utterance at a time.
- any other name: a transformers ``WavLMForXVector`` checkpoint, a folder or a hub
  id (for example ``microsoft/wavlm-base-plus-sv``), batched with its feature
  extractor's padding and attention mask.

An utterance with no voice in it (silence) gets the zero vector: its similarity
to anything is 0.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..devices import set_up_torch
from ..engines.base import ENGINE_SAMPLE_RATE
from .base import SignalInfo, SignalModel, import_backend, tone

MIN_REFERENCE_S = 1.0
"""A reference shorter than this holds too little voice for an embedding (400 speaker_reference_too_short)."""

RESEMBLYZER = "resemblyzer"


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two embeddings in [-1, 1]; 0 when either is the zero vector."""
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    if norm == 0.0:
        return 0.0
    return float(min(max(float(np.dot(a, b)) / norm, -1.0), 1.0))


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1; a zero or non-finite row becomes zeros."""
    vectors = np.nan_to_num(np.asarray(vectors, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class SpeakerEncoder(SignalModel):
    """Embeds a batch of 16 kHz utterances; each row of the result has length 1 (or is zero: no voice)."""

    @property
    @abstractmethod
    def dimensions(self) -> int:
        """Length of one embedding."""

    @abstractmethod
    def embed_sync(self, batch: Sequence[np.ndarray]) -> np.ndarray:
        """``(len(batch), dimensions)`` float32 unit vectors, in order (blocking)."""

    def warmup(self) -> None:
        self.embed_sync([tone(2.0)])


class ResemblyzerEncoder(SpeakerEncoder):
    """resemblyzer's pretrained GE2E ``VoiceEncoder``; see the module docstring."""

    RATE = 1.3  # partials per second and the last one's coverage: embed_utterance's defaults
    MIN_COVERAGE = 0.75

    def __init__(self, device: str = "cpu", cpu_threads: int = 0) -> None:
        super().__init__(device, cpu_threads)
        self._encoder: Any = None
        self.info = SignalInfo("speaker", RESEMBLYZER, "resemblyzer/pretrained.pt (GE2E)", device)

    @property
    def dimensions(self) -> int:
        return 256

    def load(self) -> None:
        resemblyzer = import_backend("resemblyzer", "the resemblyzer speaker model")
        device = set_up_torch(self.device, self.cpu_threads)
        self._encoder = resemblyzer.VoiceEncoder(device=device, verbose=False).eval()
        weights = Path(resemblyzer.__file__).parent / "pretrained.pt"
        self.info = SignalInfo("speaker", RESEMBLYZER, "resemblyzer/pretrained.pt (GE2E)", device,
                               {"resemblyzer": _version("resemblyzer"), "weights_bytes": str(weights.stat().st_size)})

    @staticmethod
    def preprocess(wav: np.ndarray) -> np.ndarray:
        """resemblyzer's ``preprocess_wav`` at 16 kHz; silence stays silence instead of becoming NaN."""
        from resemblyzer import preprocess_wav

        wav = np.asarray(wav, dtype=np.float32)
        if not np.any(wav):
            return wav
        return np.asarray(preprocess_wav(wav), dtype=np.float32)

    def embed_sync(self, batch: Sequence[np.ndarray]) -> np.ndarray:
        import torch
        from resemblyzer.audio import wav_to_mel_spectrogram

        encoder = self._encoder
        if encoder is None:
            raise RuntimeError("the resemblyzer encoder is not loaded")
        partials: list[np.ndarray] = []
        owner: list[int] = []
        for index, raw in enumerate(batch):
            wav = self.preprocess(raw)
            if not np.any(wav):
                continue  # no voice: the zero vector
            wav_slices, mel_slices = encoder.compute_partial_slices(len(wav), self.RATE, self.MIN_COVERAGE)
            if wav_slices[-1].stop >= len(wav):
                wav = np.pad(wav, (0, wav_slices[-1].stop - len(wav)))
            mel = wav_to_mel_spectrogram(wav)
            partials.extend(mel[s] for s in mel_slices)
            owner.extend([index] * len(mel_slices))
        out = np.zeros((len(batch), self.dimensions), dtype=np.float32)
        if not partials:
            return out
        with torch.inference_mode():
            embedded = encoder(torch.from_numpy(np.stack(partials)).to(encoder.device)).cpu().numpy()
        owners = np.asarray(owner)
        for index in np.unique(owners):
            out[index] = embedded[owners == index].mean(axis=0)
        return _unit_rows(out)


class WavLMXVectorEncoder(SpeakerEncoder):
    """A transformers ``WavLMForXVector`` checkpoint (folder or hub id); see the module docstring."""

    def __init__(self, model: str, device: str = "cpu", cpu_threads: int = 0) -> None:
        super().__init__(device, cpu_threads)
        self.model = model
        self._model: Any = None
        self._extractor: Any = None
        self._dimensions = 0
        self.info = SignalInfo("speaker", "wavlm-xvector", model, device)

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def load(self) -> None:
        transformers = import_backend("transformers", f"the WavLM x-vector speaker model {self.model!r}",
                                      extra="transformers")
        device = set_up_torch(self.device, self.cpu_threads)
        self._extractor = transformers.AutoFeatureExtractor.from_pretrained(self.model)
        self._model = transformers.WavLMForXVector.from_pretrained(self.model).eval().to(device)
        self._dimensions = int(self._model.config.xvector_output_dim)
        self.info = SignalInfo("speaker", "wavlm-xvector", self.model, device,
                               {"transformers": transformers.__version__})

    def embed_sync(self, batch: Sequence[np.ndarray]) -> np.ndarray:
        import torch

        if self._model is None:
            raise RuntimeError(f"the speaker model {self.model!r} is not loaded")
        inputs = self._extractor([np.asarray(w, dtype=np.float32) for w in batch], sampling_rate=ENGINE_SAMPLE_RATE,
                                 padding=True, return_attention_mask=True, return_tensors="pt")
        inputs = {key: value.to(self._model.device) for key, value in inputs.items()}
        with torch.inference_mode():
            embeddings = self._model(**inputs).embeddings
        return _unit_rows(embeddings.float().cpu().numpy())


def create_speaker_encoder(name: str, *, device: str = "cpu", cpu_threads: int = 0) -> SpeakerEncoder | None:
    """The encoder the ``speaker_model`` setting names (unloaded); None for ``none``."""
    if name == "none":
        return None
    if name == RESEMBLYZER:
        return ResemblyzerEncoder(device, cpu_threads)
    return WavLMXVectorEncoder(name, device, cpu_threads)


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"
