"""CTranslate2 -> transformers Whisper conversion: parsing, exactness, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from audio_reward.scorer_server.engines.convert import (  # noqa: E402
    ConversionError,
    ct2_whisper_to_transformers,
    is_current_conversion,
    read_ct2_model,
    whisper_state_dict,
)
from audio_reward.scorer_server.engines.model_store import resolve_ctranslate2_model  # noqa: E402


@pytest.fixture(scope="module")
def base_hf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    ct2 = Path(resolve_ctranslate2_model("base").path)
    return ct2, ct2_whisper_to_transformers(ct2, tmp_path_factory.mktemp("conv") / "whisper-base")


def test_reads_every_variable_with_its_shape_and_dtype() -> None:
    model = read_ct2_model(Path(resolve_ctranslate2_model("tiny.en").path) / "model.bin")
    assert model.spec_name == "WhisperSpec"
    emb = model.variables["decoder/embeddings/weight"]
    assert emb.shape == (51864, 384) and emb.dtype in (np.float16, np.float32)
    assert model.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    sd = whisper_state_dict(model)
    # tiny: 4 encoder + 4 decoder layers; the fused qkv is split back into three projections.
    assert sd["model.encoder.layers.3.self_attn.k_proj.weight"].shape == (384, 384)
    assert "model.encoder.layers.3.self_attn.k_proj.bias" not in sd
    assert sd["model.decoder.layers.3.encoder_attn.v_proj.bias"].shape == (384,)


def test_converted_model_decodes_token_for_token_like_ctranslate2(base_hf: tuple[Path, Path],
                                                                  sentences_16k: list[np.ndarray]) -> None:
    """Same features into both runtimes -> the same greedy tokens: the weights were carried over exactly."""
    import ctranslate2
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    ct2_dir, hf_dir = base_hf
    processor = WhisperProcessor.from_pretrained(hf_dir)
    model = WhisperForConditionalGeneration.from_pretrained(hf_dir, dtype=torch.float32).eval()
    feats = processor.feature_extractor(sentences_16k[:2], sampling_rate=16_000, return_tensors="pt",
                                        return_attention_mask=True)
    with torch.inference_mode():
        hf = model.generate(feats.input_features, attention_mask=feats.attention_mask, language="en",
                            task="transcribe", max_new_tokens=40)
    prompt = processor.tokenizer.convert_tokens_to_ids(
        ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"])
    ct2 = ctranslate2.models.Whisper(str(ct2_dir), device="cpu", compute_type="float32")
    ref = ct2.generate(ctranslate2.StorageView.from_array(feats.input_features.numpy()), [prompt] * 2,
                       beam_size=1, max_length=44, suppress_blank=True, suppress_tokens=[-1])
    eot = processor.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for hf_row, ct2_row in zip(hf.tolist(), ref, strict=True):
        ours = [t for t in hf_row if t < eot]
        theirs = [t for t in ct2_row.sequences_ids[0] if t < eot]
        assert ours == theirs and len(ours) > 5
    assert "brown fox" in processor.tokenizer.decode(hf[0], skip_special_tokens=True)


def test_generation_config_knows_languages_only_for_multilingual(base_hf: tuple[Path, Path], tmp_path: Path) -> None:
    from transformers import GenerationConfig

    _, hf_dir = base_hf
    gen = GenerationConfig.from_pretrained(hf_dir)
    assert gen.is_multilingual and gen.lang_to_id["<|en|>"] == 50259 and gen.task_to_id["transcribe"] == 50359
    assert is_current_conversion(hf_dir)
    tiny = ct2_whisper_to_transformers(resolve_ctranslate2_model("tiny.en").path, tmp_path / "tiny")
    tiny_gen = GenerationConfig.from_pretrained(tiny)
    assert not tiny_gen.is_multilingual and not tiny_gen.lang_to_id


def test_truncated_or_foreign_files_are_refused_cleanly(tmp_path: Path) -> None:
    src = Path(resolve_ctranslate2_model("tiny.en").path) / "model.bin"
    cut = tmp_path / "model.bin"
    cut.write_bytes(src.read_bytes()[:100_000])
    with pytest.raises(ConversionError, match=r"truncated|not a CTranslate2"):
        read_ct2_model(cut)
    cut.write_bytes(b"\x09\x00\x00\x00garbage")
    with pytest.raises(ConversionError, match="binary version 9"):
        read_ct2_model(cut)
    with pytest.raises(ConversionError, match=r"no model.bin"):
        ct2_whisper_to_transformers(tmp_path / "missing", tmp_path / "out")
    assert not (tmp_path / "out").exists()
