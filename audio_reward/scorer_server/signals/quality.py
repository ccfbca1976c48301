"""Predicted speech quality: DNSMOS, the MOS a listening panel would give, from the audio alone.

Engine ``dnsmos`` (the ``quality_model`` setting): the ONNX models PyPI's
``speechmos`` 0.0.1.1 ships, run with onnxruntime, offline.  P.835 gives
signal (SIG), background (BAK) and overall (OVRL) quality, P.808 one overall
MOS; all on the 1–5 scale.  speechmos scores a clip in 9.01 s windows one
hop (1 s) apart, a shorter clip doubled until it fills one, and averages the
windows, with its own calibration; so does this scorer, and a clip scores as
it would alone in speechmos.  Samples are clipped to [-1, 1] first (speechmos
refuses others).

What it shares: a clip's windows overlap by 8 s, so the P.835 model's
convolutions (about 19 GMAC a window) run once over the clip and each window
takes its slice (:mod:`.p835`), over one period of a doubled clip whose copies
fall on the spectrogram's grid (Qwen3-TTS's do); windows with the same 0 dB
share the P.808 model's convolutions the same way (:mod:`.p808`); and the
P.808 mel features of the windows come from one spectrogram of the clip.  A
4.4 s clip (doubled to 17.7 s, 7 windows) costs the P.835 convolutions of 893
frames (448 at a Qwen3-TTS length), not 6300.  The sharing rests on the model
files' tensor names and layer geometry and is checked on onnxruntime's CPU
provider only (to 1e-5 of the whole models): ``windows="whole"`` runs both models whole on
each window instead, and ``auto`` does so on CUDA.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..engines.base import ENGINE_SAMPLE_RATE
from .base import QualityWindows, SignalInfo, SignalModel, import_backend, tone
from .p808 import SharedWindowP808
from .p835 import WINDOW_SAMPLES, SharedWindowP835, repeat_period
from .windows import WholeModel

DNSMOS = "dnsmos"

P808_HOP, P808_FFT, P808_MELS = 160, 321, 120
"""speechmos's ``audio_melspec`` defaults: 10 ms hop, 321-point FFT, 120 mel bands."""


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

    def warmup(self) -> None:
        self.score_sync([tone(1.0)])


class DnsmosScorer(QualityScorer):
    """speechmos's DNSMOS (P.835 and P.808 ONNX models); see the module docstring."""

    max_windows_per_call = 8
    """Windows in one call of the P.835 head or the P.808 model; on a CPU a larger batch is no faster."""

    def __init__(self, device: str = "cpu", cpu_threads: int = 0, windows: QualityWindows = "auto") -> None:
        super().__init__(device, cpu_threads)
        self.windows = windows
        self._dnsmos: Any = None
        self._p835: SharedWindowP835 | WholeModel | None = None
        self._p808: SharedWindowP808 | WholeModel | None = None
        self._module: Any = None
        self._librosa: Any = None
        self.info = SignalInfo("quality", DNSMOS, "speechmos/dnsmos_models (sig_bak_ovr, model_v8)", device)

    def load(self) -> None:
        dnsmos = import_backend("speechmos.dnsmos", "the DNSMOS quality model")
        import onnxruntime as ort

        models = Path(dnsmos.__file__).parent / "dnsmos_models"
        primary, p808 = str(models / "sig_bak_ovr.onnx"), str(models / "model_v8.onnx")
        model = dnsmos.DNSMOS(primary, p808)
        # speechmos builds its sessions with onnxruntime's defaults; this server opens the same files with its
        # own threads and device, in the parts that let a clip's windows share work.
        options = ort.SessionOptions()
        if self.cpu_threads:
            options.intra_op_num_threads = self.cpu_threads
        # The ASR engine shares these cores: threads that spin waiting for work would take its time.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if self.device in ("cuda", "auto") \
            else ["CPUExecutionProvider"]
        providers = [p for p in providers if p in ort.get_available_providers()]
        # The provider onnxruntime actually runs (a GPU build without its CUDA libraries falls back to the CPU).
        p808_whole = WholeModel(ort.InferenceSession(p808, options, providers=providers))
        used = p808_whole.session.get_providers()[0]
        shared = self.windows == "shared" or (self.windows == "auto" and used == "CPUExecutionProvider")
        if shared:
            self._p835 = SharedWindowP835.load(primary, options, providers)
            self._p808 = SharedWindowP808.load(p808, options, providers, whole=p808_whole)
        else:
            self._p835 = WholeModel(ort.InferenceSession(primary, options, providers=providers))
            self._p808 = p808_whole
        model.onnx_sess = model.p808_onnx_sess = None  # speechmos's own sessions never run here
        self._dnsmos = model
        self._module = dnsmos
        self._librosa = import_backend("librosa", "the DNSMOS quality model")
        self.info = SignalInfo("quality", DNSMOS, self.info.model_id, "cuda" if used.startswith("CUDA") else "cpu",
                               {"onnxruntime": ort.__version__, "provider": used,
                                "windows": "shared" if shared else "whole"})

    def _clip(self, audio: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """speechmos's view of one clip: the samples its windows cut from (a short clip doubled until it fills
        one window) and where each window starts (1 s apart, each 9.01 s long)."""
        fs = ENGINE_SAMPLE_RATE
        length = int(self._module.INPUT_LENGTH * fs)
        audio = np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0)
        while len(audio) < length:  # doubled, as speechmos does, so the windows fall where its own do
            audio = np.concatenate([audio, audio])
        hops = int(np.floor(len(audio) / fs) - self._module.INPUT_LENGTH) + 1
        # speechmos's own float arithmetic for the end, and its check: a window the rounding cuts one sample
        # short is skipped (16.01 * 16000 < 256160), and so is it here.
        ends = [(i * fs, int((i + self._module.INPUT_LENGTH) * fs)) for i in range(hops)]
        return audio, [start for start, end in ends if len(audio[start:end]) >= length]

    def _p808_inputs(self, audio: np.ndarray, starts: Sequence[int]) -> tuple[list[np.ndarray], list[float]]:
        """Each window's P.808 input, ``model.audio_melspec(window[:-160])`` as float32, from one mel spectrogram
        of the clip, and the loudest mel bin of each window, its 0 dB.

        The windows of a clip overlap by 8 s, so their mel frames are the clip's own, except the few that
        speechmos's per-window spectrogram zero-pads at the window's two edges: those are computed from the
        edge samples alone, the rest sliced from the clip's spectrogram, and each window is then scaled to dB
        against its own maximum, as ``audio_melspec`` does.
        """
        librosa = self._librosa
        hop = P808_HOP
        span = int(self._module.INPUT_LENGTH * ENGINE_SAMPLE_RATE) - hop  # the samples audio_melspec sees

        def power(samples: np.ndarray) -> np.ndarray:
            return np.asarray(librosa.feature.melspectrogram(y=samples, sr=ENGINE_SAMPLE_RATE, n_fft=P808_FFT,
                                                             hop_length=hop, n_mels=P808_MELS))

        whole = power(audio)  # frame j is centred on sample j * hop, as frame k of a window on start + k * hop
        last = span // hop  # a window's frames are 0..last; 0, last - 1 and last reach into its zero padding
        out, references = [], []
        for start in starts:
            first = start // hop
            head = power(audio[start:start + 3 * hop])[:, :1]
            tail = power(audio[start + span - 3 * hop:start + span])[:, 2:]
            mel = np.concatenate([head, whole[:, first + 1:first + last - 1], tail], axis=1)
            references.append(float(np.max(mel)))
            out.append(((librosa.power_to_db(mel, ref=np.max) + 40) / 40).T.astype(np.float32))
        return out, references

    def _window_scores(self, audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The raw P.835 (SIG, BAK, OVRL) of each of the clip's windows, (windows, 3), and their P.808 MOS."""
        p835, p808, calls = self._p835, self._p808, self.max_windows_per_call
        assert p835 is not None and p808 is not None  # score_sync checked the model loaded (they load before it)
        clip, starts = self._clip(audio)
        features, references = self._p808_inputs(clip, starts)
        if isinstance(p835, WholeModel):
            raw = p835.window_scores([clip[start:start + WINDOW_SAMPLES] for start in starts], calls)
        else:
            raw = p835.window_scores(clip, starts, calls, repeat_period(len(audio), len(clip) // len(audio)))
        if isinstance(p808, WholeModel):
            return raw, p808.window_scores(features, calls)[:, 0]
        return raw, p808.window_scores(features, references, [start // P808_HOP for start in starts], calls)

    def score_sync(self, batch: Sequence[np.ndarray]) -> list[QualityScore]:
        model = self._dnsmos
        if model is None:
            raise RuntimeError("the DNSMOS model is not loaded")
        out = []
        for audio in batch:
            if len(audio) == 0:
                raise ValueError("DNSMOS needs at least one sample")
            raw, p808 = self._window_scores(audio)
            scores = raw.astype(np.float64)  # speechmos's calibration, window by window, then each clip's mean
            sig, bak, ovr = model.get_polyfit_val(scores[:, 0], scores[:, 1], scores[:, 2], False)
            out.append(QualityScore(ovrl=float(np.mean(ovr)), sig=float(np.mean(sig)), bak=float(np.mean(bak)),
                                    p808=float(np.mean(p808))))
        return out

def create_quality_scorer(name: str, *, device: str = "cpu", cpu_threads: int = 0,
                          windows: QualityWindows = "auto") -> QualityScorer | None:
    """The scorer the ``quality_model`` setting names (unloaded); None for ``none``."""
    if name == "none":
        return None
    if name == DNSMOS:
        return DnsmosScorer(device, cpu_threads, windows)
    raise ValueError(f"unknown quality model {name!r}; available: {DNSMOS}, none")
