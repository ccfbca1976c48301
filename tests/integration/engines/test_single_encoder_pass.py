"""One encoder pass per utterance when the language is detected, on tiny random multilingual Whisper checkpoints.

The checkpoints are built from config classes (random weights, the packaged
Whisper base's multilingual tokenizer); faster-whisper runs the same weights
converted by CTranslate2's own converter.  Each test counts the encoder calls
and the rows they encode, and checks that detection plus decoding gives the
transcript the two-step path gives: detect the language from the features,
then transcribe with that language forced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from audio_reward.scorer_server.engines import (
    EngineConfig,
    TranscriptionInput,
    create_engine,
)


@pytest.fixture(scope="module")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from audio_reward.scorer_server.engines.checkpoints import (
        resolve_transformers_checkpoint,
    )
    from tests.testkit.random_checkpoints import build_random_whisper

    base = resolve_transformers_checkpoint("base").path  # the multilingual tokenizer and generation config
    return build_random_whisper(tmp_path_factory.mktemp("whisper-tiny") / "hf", size="tiny", tokenizer_from=base)


@pytest.fixture(scope="module")
def tiny_whisper_ct2(tiny_whisper: Path) -> Path:
    converters = pytest.importorskip("ctranslate2.converters")
    from transformers import WhisperFeatureExtractor

    out = tiny_whisper.parent / "ct2"
    converters.TransformersConverter(str(tiny_whisper), copy_files=["tokenizer.json"]).convert(
        str(out), quantization="float32")
    WhisperFeatureExtractor.from_pretrained(tiny_whisper).to_json_file(str(out / "preprocessor_config.json"))
    return out


class CountingCT2Whisper:
    """Wraps CTranslate2's Whisper: counts ``encode`` calls and rows, records what ``detect_language`` got."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.encoded_rows: list[int] = []
        self.encoder_outputs: list[Any] = []
        self.detected_from: list[Any] = []

    def encode(self, features: Any, *args: Any, **kwargs: Any) -> Any:
        self.encoded_rows.append(int(features.shape[0]))
        out = self._model.encode(features, *args, **kwargs)
        self.encoder_outputs.append(out)
        return out

    def detect_language(self, features: Any, *args: Any, **kwargs: Any) -> Any:
        self.detected_from.append(features)
        return self._model.detect_language(features, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _clips(sentences_16k: list[np.ndarray]) -> list[np.ndarray]:
    return sentences_16k[:3]


@pytest.mark.parametrize("batched", [True, False])
def test_faster_whisper_detects_from_the_encoder_output_it_decodes_from(
        tiny_whisper_ct2: Path, sentences_16k: list[np.ndarray], batched: bool) -> None:
    engine = create_engine("faster-whisper", EngineConfig(model=str(tiny_whisper_ct2), compute_type="float32",
                                                          options={"batched": batched}))
    engine.load()
    try:
        assert engine.info.extra["multilingual"] == "true"
        clips = _clips(sentences_16k)
        counter = CountingCT2Whisper(engine._model.model)  # type: ignore[attr-defined]
        engine._model.model = counter  # type: ignore[attr-defined]
        detected = engine.transcribe_batch_sync([TranscriptionInput(a, None) for a in clips])
        assert sum(counter.encoded_rows) == len(clips)  # one encoder pass per utterance
        assert len(counter.encoded_rows) == (1 if batched else len(clips))
        # Detection read the encoder output itself, not features it would encode again.
        assert all(any(d is o for o in counter.encoder_outputs) for d in counter.detected_from)

        # Before: faster-whisper's own detector on the features, then the transcript with that language forced.
        engine._model.model = counter._model  # type: ignore[attr-defined]
        theirs = [engine._model.detect_language(a)[0] for a in clips]  # type: ignore[attr-defined]
        assert_same_as_forced(engine, clips, detected, theirs)
    finally:
        engine.close()


def assert_same_as_forced(engine: Any, clips: list[np.ndarray], detected: list[Any], theirs: list[str]) -> None:
    """Detected languages are the reference detector's, and transcripts equal those with that language forced."""
    assert [t.language for t in detected] == theirs
    forced = engine.transcribe_batch_sync([TranscriptionInput(a, lang) for a, lang in zip(clips, theirs, strict=True)])
    assert [t.text for t in detected] == [t.text for t in forced]
    assert [t.num_tokens for t in detected] == [t.num_tokens for t in forced]

def test_transformers_passes_the_detection_encoder_outputs_to_generate(
    tiny_whisper: Path, sentences_16k: list[np.ndarray]
) -> None:
    import torch

    engine = create_engine("transformers", EngineConfig(model=str(tiny_whisper), max_batch_size=8))
    engine.load()
    try:
        backend = engine._backend  # type: ignore[attr-defined]
        encoder = backend.model.get_encoder()
        rows: list[int] = []

        def count(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
            features = args[0] if args else kwargs["input_features"]
            rows.append(int(features.shape[0]))

        hook = encoder.register_forward_hook(count, with_kwargs=True)
        clips = _clips(sentences_16k)
        try:
            detected = engine.transcribe_batch_sync([TranscriptionInput(a, None) for a in clips])
        finally:
            hook.remove()
        assert rows == [len(clips)]  # one encoder call for detection and generation together

        # Before: detect_language on the features, then generate from the features with that language.
        feats = backend.processor.feature_extractor(clips, sampling_rate=16_000, return_tensors="pt")
        with torch.inference_mode():
            ids = backend.model.detect_language(input_features=feats.input_features)
        theirs = [backend.id_to_lang[int(i)] for i in ids.view(-1).tolist()]
        assert_same_as_forced(engine, clips, detected, theirs)
    finally:
        engine.close()
