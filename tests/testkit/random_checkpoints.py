"""Randomly initialised ASR checkpoints built from config classes, for machines without a model hub.

The engines and the GPU benchmark need real checkpoint folders (config,
weights, tokenizer, processor) to exercise loading, batching, prompting and
decode caps.  Where the real weights cannot be downloaded, these builders
write folders of the right architecture and size with random weights: the
transcripts are garbage, the mechanics and the speed are real.

``size="tiny"`` is small enough for CPU tests (its decoder heads are 32 wide,
the smallest head size vLLM's CPU attention takes); ``size="full"`` matches the
published model's shapes (Whisper large-v3, Qwen3-ASR-0.6B) for GPU speed
measurements.

    python -m tests.testkit.random_checkpoints whisper --out DIR     # or qwen3_asr; --help for the rest

``never_stop=True`` zeroes the output-embedding rows of the end-of-text
tokens (the output projection is tied to them), so their logit is exactly
0 while the largest of the others is positive: greedy decoding never ends
early and every engine decodes exactly its token cap per clip.  That makes
throughput on random weights comparable across engines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

Size = Literal["tiny", "full"]

# Qwen3-ASR's chat format: optional system context, the user turn holding the audio, the assistant reply.
QWEN3_ASR_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'audio' -%}{{- '<|audio_start|><|audio_pad|><|audio_end|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
QWEN3_ASR_SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>",
    "<asr_text>", "<timestamp>",
)


def _byte_level_tokenizer(special: tuple[str, ...], vocab_size: int):  # type: ignore[no-untyped-def]
    """A byte-level BPE over the 256 byte symbols plus ``special`` (no merges: one token per byte)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    vocab = {sym: i for i, sym in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(special))
    if tok.get_vocab_size() > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is below the {tok.get_vocab_size()} tokens needed")
    return tok


def _silence_tokens(embedding: Any, token_ids: list[int]) -> None:
    import torch

    with torch.no_grad():
        for token in token_ids:
            embedding.weight[token].zero_()


def _init_model(cls: Any, config: Any, device: str | None) -> Any:
    """Random weights, built on ``device`` (a GPU builds large-v3 in seconds) in half precision there."""
    import torch

    if device is None or device == "cpu":
        return cls(config).eval()
    with torch.device(device):
        return cls(config).to(torch.float16 if device.startswith("cuda") else torch.float32).eval()


def build_random_qwen3_asr(out_dir: str | Path, size: Size = "tiny", seed: int = 0, *, never_stop: bool = False,
                           device: str | None = None) -> Path:
    """Write a random-weight Qwen3-ASR checkpoint (transformers-native format) to ``out_dir``."""
    import torch
    from transformers import (
        Qwen2Tokenizer,
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )

    out = Path(out_dir)
    raw = _byte_level_tokenizer(QWEN3_ASR_SPECIAL_TOKENS, 151936 if size == "full" else 512)
    ids = {t: raw.token_to_id(t) for t in QWEN3_ASR_SPECIAL_TOKENS}
    if size == "tiny":
        audio = {"num_mel_bins": 128, "encoder_layers": 2, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
                 "d_model": 32, "output_dim": 48, "downsample_hidden_size": 16}
        text = {"vocab_size": 512, "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "max_position_embeddings": 4096,
                "tie_word_embeddings": True}
    else:  # Qwen3-ASR-0.6B shapes: an 18-layer audio encoder and the Qwen3-0.6B decoder
        audio = {"num_mel_bins": 128, "encoder_layers": 18, "encoder_attention_heads": 14, "encoder_ffn_dim": 3584,
                 "d_model": 896, "output_dim": 1024, "downsample_hidden_size": 480}
        text = {"vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
                "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
                "max_position_embeddings": 65536, "tie_word_embeddings": True}
    config = Qwen3ASRConfig(
        audio_config=audio, text_config=text, audio_token_id=ids["<|audio_pad|>"],
        timestamp_token_id=ids["<timestamp>"], pad_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|endoftext|>"], ids["<|im_end|>"]],
    )
    torch.manual_seed(seed)
    model = _init_model(Qwen3ASRForConditionalGeneration, config, device)
    if never_stop:
        _silence_tokens(model.get_input_embeddings(), [ids["<|endoftext|>"], ids["<|im_end|>"]])
    model.generation_config.eos_token_id = [ids["<|endoftext|>"], ids["<|im_end|>"]]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    tokenizer = Qwen2Tokenizer(
        tokenizer_object=raw, unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"},
    )
    processor = Qwen3ASRProcessor(
        feature_extractor=Qwen3ASRFeatureExtractor(feature_size=128), tokenizer=tokenizer,
        chat_template=QWEN3_ASR_CHAT_TEMPLATE,
    )
    return _save(out, model, processor, {"architecture": "qwen3_asr", "size": size, "seed": seed,
                                         "never_stop": never_stop})


def build_random_whisper(out_dir: str | Path, size: Size = "tiny", seed: int = 0,
                         tokenizer_from: str | Path | None = None, *, never_stop: bool = False,
                         device: str | None = None) -> Path:
    """Write a random-weight Whisper checkpoint; ``size="full"`` has large-v3's shapes.

    The tokenizer and generation settings come from ``tokenizer_from``, a
    transformers Whisper folder (for example one made by
    :func:`audio_reward.scorer_server.engines.convert.ct2_whisper_to_transformers` from the packaged ``base``);
    the vocabulary is the same across multilingual Whisper sizes up to one
    extra language token in large-v3, which only shifts ids past it.
    """
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperForConditionalGeneration,
        WhisperProcessor,
    )

    if tokenizer_from is None:
        raise ValueError("build_random_whisper needs tokenizer_from: a transformers Whisper folder")
    src = Path(tokenizer_from)
    base_config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    shapes = (
        {"d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
         "decoder_attention_heads": 2, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "num_mel_bins": 80}
        if size == "tiny" else
        {"d_model": 1280, "encoder_layers": 32, "decoder_layers": 32, "encoder_attention_heads": 20,
         "decoder_attention_heads": 20, "encoder_ffn_dim": 5120, "decoder_ffn_dim": 5120, "num_mel_bins": 128}
    )
    keep = ("vocab_size", "pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
            "suppress_tokens", "begin_suppress_tokens", "max_source_positions", "max_target_positions")
    config = WhisperConfig(**{k: base_config[k] for k in keep if k in base_config}, **shapes)
    torch.manual_seed(seed)
    model = _init_model(WhisperForConditionalGeneration, config, device)
    model.generation_config = GenerationConfig.from_pretrained(src)
    if never_stop:
        _silence_tokens(model.get_decoder().embed_tokens, [int(config.eos_token_id)])
    processor = WhisperProcessor.from_pretrained(src)
    processor.feature_extractor = type(processor.feature_extractor)(feature_size=config.num_mel_bins)
    return _save(Path(out_dir), model, processor, {"architecture": "whisper", "size": size, "seed": seed,
                                                   "never_stop": never_stop})


# A Paraformer of Paraformer-zh's layout (SANM encoder, SANM decoder, CIF predictor, 80 mel x LFR 7/6 features)
# with tiny sizes; the keys are those of FunASR's config.yaml for paraformer-zh.
PARAFORMER_TINY_CONFIG: dict[str, Any] = {
    "model": "Paraformer",
    "model_conf": {"ctc_weight": 0.0, "lsm_weight": 0.1, "length_normalized_loss": True, "predictor_weight": 1.0,
                   "predictor_bias": 1, "sampling_ratio": 0.75},
    "encoder": "SANMEncoder",
    "encoder_conf": {"output_size": 64, "attention_heads": 2, "linear_units": 128, "num_blocks": 2,
                     "dropout_rate": 0.0, "positional_dropout_rate": 0.0, "attention_dropout_rate": 0.0,
                     "input_layer": "pe", "pos_enc_class": "SinusoidalPositionEncoder", "normalize_before": True,
                     "kernel_size": 11, "sanm_shfit": 0, "selfattention_layer_type": "sanm"},
    "decoder": "ParaformerSANMDecoder",
    "decoder_conf": {"attention_heads": 2, "linear_units": 128, "num_blocks": 2, "dropout_rate": 0.0,
                     "positional_dropout_rate": 0.0, "self_attention_dropout_rate": 0.0,
                     "src_attention_dropout_rate": 0.0, "att_layer_num": 2, "kernel_size": 11, "sanm_shfit": 0},
    "predictor": "CifPredictorV2",
    "predictor_conf": {"idim": 64, "threshold": 1.0, "l_order": 1, "r_order": 1, "tail_threshold": 0.45},
    "frontend": "WavFrontend",
    "frontend_conf": {"fs": 16000, "window": "hamming", "n_mels": 80, "frame_length": 25, "frame_shift": 10,
                      "lfr_m": 7, "lfr_n": 6, "dither": 0.0},
    "tokenizer": "CharTokenizer",
    "tokenizer_conf": {"unk_symbol": "<unk>", "split_with_space": True},
}
PARAFORMER_TINY_TOKENS = ("<blank>", "<s>", "</s>", *"你好世界今天气很的是一不了人我在有他这中大来上国个到说们为子和",
                          "<unk>")


def build_random_paraformer(out_dir: str | Path, seed: int = 0, *, bias_token: str | None = None) -> Path:
    """Write a random-weight Paraformer folder (config.yaml, model.pt, tokens.json, am.mvn) from FunASR's classes.

    FunASR's ``AutoModel(model=DIR)`` loads it as it loads a downloaded
    ``paraformer-zh``.  ``bias_token`` makes the decoder prefer that token at
    every position (its output bias raised), so every transcript is that
    character repeated: a known answer for tests.
    """
    import funasr  # noqa: F401  # importing it registers FunASR's model classes in its tables
    import torch
    import yaml
    from funasr.register import tables

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads(json.dumps(PARAFORMER_TINY_CONFIG))
    (out / "config.yaml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    (out / "tokens.json").write_text(json.dumps(list(PARAFORMER_TINY_TOKENS), ensure_ascii=False), encoding="utf-8")
    dims = 80 * config["frontend_conf"]["lfr_m"]
    # Kaldi nnet text of the global CMVN (shift, then scale), as FunASR's am.mvn holds it.
    shift = " ".join(["0"] * dims)
    scale = " ".join(["0.1"] * dims)
    (out / "am.mvn").write_text(
        f"<Nnet>\n<Splice> {dims} {dims}\n[ 0 ]\n<AddShift> {dims} {dims}\n<LearnRateCoef> 0 [ {shift} ]\n"
        f"<Rescale> {dims} {dims}\n<LearnRateCoef> 0 [ {scale} ]\n</Nnet>\n", encoding="utf-8")
    torch.manual_seed(seed)
    model_cls = tables.model_classes[config["model"]]
    model = model_cls(**config, **config["model_conf"], input_size=dims, vocab_size=len(PARAFORMER_TINY_TOKENS))
    if bias_token is not None:
        with torch.no_grad():
            layer = model.decoder.output_layer
            layer.bias[PARAFORMER_TINY_TOKENS.index(bias_token)] += 100.0
    torch.save(model.state_dict(), out / "model.pt")
    (out / "random_init.json").write_text(json.dumps({"architecture": "paraformer", "size": "tiny", "seed": seed,
                                                      "bias_token": bias_token}))
    return out


def _save(out: Path, model: Any, processor: Any, marker: dict[str, Any]) -> Path:
    """Write the checkpoint, with ``random_init.json`` recording how its random weights were made."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    (out / "random_init.json").write_text(json.dumps(marker))
    return out


def build_random_wavlm_xvector(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a tiny random-weight ``WavLMForXVector`` (the architecture of ``microsoft/wavlm-base-plus-sv``).

    Its feature extractor is that model's: 16 kHz, normalised, with an attention mask.
    """
    import torch
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    config = WavLMConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16, 16), conv_stride=(5, 4, 4), conv_kernel=(10, 8, 4), feat_extract_norm="layer",
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, num_buckets=32, max_bucket_distance=64,
        tdnn_dim=(16, 16, 32), tdnn_kernel=(5, 3, 1), tdnn_dilation=(1, 2, 1), xvector_output_dim=24,
    )
    torch.manual_seed(seed)
    model = _init_model(WavLMForXVector, config, None)
    extractor = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16_000, padding_value=0.0,
                                         do_normalize=True, return_attention_mask=True)
    return _save(Path(out_dir), model, extractor, {"architecture": "wavlm_xvector", "size": "tiny", "seed": seed})


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.testkit.random_checkpoints ARCH --out DIR``: one random checkpoint folder."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.testkit.random_checkpoints", description=main.__doc__)
    parser.add_argument("arch", choices=["whisper", "qwen3_asr", "paraformer"])
    parser.add_argument("--out", type=Path, required=True, help="folder to write (created)")
    parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--never-stop", action="store_true", help="greedy decoding never ends before the cap")
    parser.add_argument("--device", default=None, help="build on this device (cuda builds full sizes fast)")
    parser.add_argument("--tokenizer-from", default="base",
                        help="Whisper only: a transformers Whisper folder, or a packaged name (default: base, "
                             "multilingual) converted first")
    args = parser.parse_args(argv)
    if args.arch == "paraformer":
        out = build_random_paraformer(args.out, args.seed)
    elif args.arch == "qwen3_asr":
        out = build_random_qwen3_asr(args.out, args.size, args.seed, never_stop=args.never_stop, device=args.device)
    else:
        from audio_reward.scorer_server.engines.checkpoints import resolve_transformers_checkpoint

        tokenizer_from = resolve_transformers_checkpoint(args.tokenizer_from).path
        out = build_random_whisper(args.out, args.size, args.seed, tokenizer_from, never_stop=args.never_stop,
                                   device=args.device)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
