"""Paraformer through FunASR's ``AutoModel``: Seed-TTS-eval's Chinese ASR.

Seed-TTS-eval's ``run_wer.py`` scores Chinese with ``AutoModel(model="paraformer-zh")``
and ``model.generate(input=wav_path, batch_size_s=300)``, one file at a time,
taking ``res[0]["text"]``.  This engine loads the same model the same way,
from a local model folder (``config.yaml``, ``model.pt``, ``tokens.json``,
``am.mvn``: what FunASR downloads for ``paraformer-zh``), and hands FunASR
16 kHz float waveforms, which it decodes as it decodes the files.  One
utterance per call by default, as the benchmark does: FunASR pads a batch,
and a padded clip can end in other characters than the same clip alone (seen
on the last character of a 2.2 s clip padded to 3 s, tiny random model), so
only ``--engine-option batched=true`` (one ``generate`` call per scheduler batch,
faster) gives up exact parity.  Paraformer is non-autoregressive and greedy; it
has no language setting (a Chinese model) and no decode cap.

A hub name (``paraformer-zh``) with no local folder is refused when the
engine is built, before the server starts, in one line that says how to
provide the folder; FunASR itself would try to download it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from .base import EngineInfo, EngineOption, ThreadedEngine, Transcription, TranscriptionInput
from .model_store import sha256_of
from .registry import EngineConfig

log = logging.getLogger(__name__)

MODEL_FILES = ("config.yaml", "model.pt")


class FunASRModelFolderError(ValueError):
    """No FunASR model folder at the given name; the message says how to provide one (raised at construction)."""
PARAFORMER_ZH_HUB = {
    "paraformer-zh": ("modelscope", "iic/speech_seaco_paraformer_large_asr_nat-zh-cn-16k-common-vocab8404-pytorch"),
}
"""FunASR's own hub names (funasr/download/name_maps_from_hub.py) and the ModelScope repository each means."""


def model_folder(name: str) -> Path:
    """The local FunASR model folder for ``name``; one line saying how to get it when there is none."""
    path = Path(name).expanduser()
    if path.is_dir():
        if missing := [f for f in MODEL_FILES if not (path / f).exists()]:
            raise FunASRModelFolderError(f"{path} is not a FunASR model folder (no {', '.join(missing)})")
        return path
    if name in PARAFORMER_ZH_HUB:
        hub, repo = PARAFORMER_ZH_HUB[name]
        raise FunASRModelFolderError(
            f"FunASR model {name!r} has no local copy and this server downloads nothing: on a machine with network "
            f"run `{hub} download --model {repo} --local_dir DIR` (or FunASR's AutoModel(model={name!r}) once, "
            f"which saves it under ~/.cache/modelscope), copy DIR here and pass --model DIR")
    raise FunASRModelFolderError(f"model folder {name!r} does not exist (a FunASR folder holds config.yaml and "
                                 "model.pt)")


class FunASREngine(ThreadedEngine):
    """FunASR ``AutoModel`` (Paraformer) behind the engine interface."""

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "batched": EngineOption(bool, False, "one padded generate call per batch (faster; a padded clip may end "
                                "differently than alone, so not the benchmark's exact transcripts)"),
    }

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(workers=1)
        self._configure("funasr", config)
        self._folder = model_folder(config.model)
        self._model: Any = None

    @property
    def prefers_batches(self) -> bool:
        return bool(self.options["batched"])

    @property
    def languages(self) -> frozenset[str] | None:
        return frozenset({"zh"})  # Paraformer-zh transcribes Mandarin (and the English words inside it)

    def load(self) -> None:
        if self.config.beam_size != 1:
            raise ValueError("the funasr engine decodes Paraformer greedily: set beam_size to 1")
        folder = self._folder
        from funasr import AutoModel
        device = "cuda" if self.config.device in ("cuda", "auto") else self.config.device
        threads = self.config.cpu_threads or min(4, os.cpu_count() or 1)
        self._model = AutoModel(model=str(folder), device=device, ncpu=threads, disable_update=True, disable_pbar=True)
        self.info = EngineInfo("funasr", str(folder), weights_sha256=sha256_of(folder / "model.pt"),
                               device=str(self._model.kwargs.get("device", device)),
                               extra={"model": str(self._model.kwargs.get("model", ""))})
        log.info("FunASR model loaded", extra={"model": str(folder)})

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        if self._model is None:
            raise RuntimeError("engine not loaded: call load() first")
        items = list(batch)
        # The scheduler checks that one result came back per utterance, for every engine.
        results = self._model.generate(input=[item.audio for item in items], batch_size=len(items))
        return [Transcription(str(r.get("text", "")), "zh") for r in results]
