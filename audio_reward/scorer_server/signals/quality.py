"""Predicted speech quality: DNSMOS, the MOS a listening panel would give, from the audio alone.

Engine ``dnsmos`` (the ``quality_model`` setting): the ONNX models PyPI's
``speechmos`` 0.0.1.1 ships, run with onnxruntime, offline.  P.835 gives
signal (SIG), background (BAK) and overall (OVRL) quality, P.808 one overall
MOS; all on the 1–5 scale.  speechmos scores a clip in 9.01 s windows one
hop (1 s) apart, a shorter clip doubled until it fills one, and averages the
windows; here the windows of every clip of a batch go through each model in one
call, with speechmos's own features and calibration, so a batch scores as each
clip would alone.  Samples are clipped to [-1, 1] first (speechmos refuses others).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..engines.base import ENGINE_SAMPLE_RATE
from .base import SignalInfo, SignalModel, import_backend

DNSMOS = "dnsmos"


@dataclass(frozen=True)
class QualityScore:
    """DNSMOS of one utterance, each on the 1–5 scale."""

    ovrl: float
    sig: float
    bak: float
    p808: float

    def fields(self) -> dict[str, float]:
        """The response fields (``dnsmos_ovrl``, ...)."""
        return {"dnsmos_ovrl": self.ovrl, "dnsmos_sig": self.sig, "dnsmos_bak": self.bak, "dnsmos_p808": self.p808}


class QualityScorer(SignalModel):
    """Scores a batch of 16 kHz utterances."""

    @abstractmethod
    def score_sync(self, batch: Sequence[np.ndarray]) -> list[QualityScore]:
        """One score per utterance, in order (blocking)."""

    async def score(self, batch: Sequence[np.ndarray]) -> list[QualityScore]:
        """:meth:`score_sync` on the model's thread."""
        return await self.run(self.score_sync, batch)

    def warmup(self) -> None:
        t = np.arange(ENGINE_SAMPLE_RATE, dtype=np.float32) / ENGINE_SAMPLE_RATE
        self.score_sync([0.1 * np.sin(2 * np.pi * 220.0 * t).astype(np.float32)])


class DnsmosScorer(QualityScorer):
    """speechmos's DNSMOS (P.835 and P.808 ONNX models); see the module docstring."""

    MAX_WINDOWS_PER_CALL = 64  # bounds one ONNX call's input (64 windows of 9 s: 37 MB)

    def __init__(self, device: str = "cpu", cpu_threads: int = 0) -> None:
        super().__init__()
        self.device = device
        self.cpu_threads = cpu_threads
        self._dnsmos: Any = None
        self.info = SignalInfo("quality", DNSMOS, "speechmos/dnsmos_models (sig_bak_ovr, model_v8)", device)

    def load(self) -> None:
        dnsmos = import_backend("speechmos.dnsmos", "the DNSMOS quality model")
        import onnxruntime as ort

        models = Path(dnsmos.__file__).parent / "dnsmos_models"
        primary, p808 = str(models / "sig_bak_ovr.onnx"), str(models / "model_v8.onnx")
        model = dnsmos.DNSMOS(primary, p808)
        # speechmos builds its sessions with onnxruntime's defaults; rebuild them with this server's threads
        # and device, from the same files.
        options = ort.SessionOptions()
        if self.cpu_threads:
            options.intra_op_num_threads = self.cpu_threads
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if self.device in ("cuda", "auto") \
            else ["CPUExecutionProvider"]
        available = set(ort.get_available_providers())
        providers = [p for p in providers if p in available]
        model.onnx_sess = ort.InferenceSession(primary, options, providers=providers)
        model.p808_onnx_sess = ort.InferenceSession(p808, options, providers=providers)
        self._dnsmos = model
        self._module = dnsmos
        used = model.onnx_sess.get_providers()[0]
        self.info = SignalInfo("quality", DNSMOS, self.info.model_id, "cuda" if used.startswith("CUDA") else "cpu",
                               {"onnxruntime": ort.__version__, "provider": used})

    def _windows(self, audio: np.ndarray) -> list[np.ndarray]:
        """speechmos's windows of one clip: 9.01 s each, 1 s apart, a short clip repeated to fill one."""
        fs = ENGINE_SAMPLE_RATE
        length = int(self._module.INPUT_LENGTH * fs)
        audio = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
        while len(audio) < length:  # doubled, as speechmos does, so the windows fall where its own do
            audio = np.concatenate([audio, audio])
        hops = int(np.floor(len(audio) / fs) - self._module.INPUT_LENGTH) + 1
        windows = [audio[int(i * fs): int((i + self._module.INPUT_LENGTH) * fs)] for i in range(hops)]
        return [w for w in windows if len(w) >= length]

    def score_sync(self, batch: Sequence[np.ndarray]) -> list[QualityScore]:
        model = self._dnsmos
        if model is None:
            raise RuntimeError("the DNSMOS model is not loaded")
        windows: list[np.ndarray] = []
        owner: list[int] = []
        for index, audio in enumerate(batch):
            if len(audio) == 0:
                raise ValueError("DNSMOS needs at least one sample")
            clip = self._windows(audio)
            windows.extend(clip)
            owner.extend([index] * len(clip))
        raw = np.zeros((len(windows), 3), dtype=np.float64)
        p808 = np.zeros(len(windows), dtype=np.float64)
        step = self.MAX_WINDOWS_PER_CALL
        for start in range(0, len(windows), step):
            chunk = windows[start:start + step]
            signal = np.stack(chunk).astype(np.float32)
            mels = np.stack([model.audio_melspec(audio=w[:-160]) for w in chunk]).astype(np.float32)
            raw[start:start + len(chunk)] = model.onnx_sess.run(None, {"input_1": signal})[0]
            p808[start:start + len(chunk)] = model.p808_onnx_sess.run(None, {"input_1": mels})[0][:, 0]
        sig, bak, ovr = model.get_polyfit_val(raw[:, 0], raw[:, 1], raw[:, 2], False)
        owners = np.asarray(owner)
        out = []
        for index in range(len(batch)):
            mine = owners == index
            out.append(QualityScore(ovrl=float(np.mean(ovr[mine])), sig=float(np.mean(sig[mine])),
                                    bak=float(np.mean(bak[mine])), p808=float(np.mean(p808[mine]))))
        return out


def create_quality_scorer(name: str, *, device: str = "cpu", cpu_threads: int = 0) -> QualityScorer | None:
    """The scorer the ``quality_model`` setting names (unloaded); None for ``none``."""
    if name == "none":
        return None
    if name == DNSMOS:
        return DnsmosScorer(device, cpu_threads)
    raise ValueError(f"unknown quality model {name!r}; available: {DNSMOS}, none")
