"""Tiny random Qwen3-Omni thinker folders from transformers' own config and model classes, for CPU tests.

The folder holds what a Qwen3-Omni checkpoint holds for the thinker: the
weights and config, a byte-level tokenizer with Qwen's special tokens (the
audio ones named as the real tokenizer names them), the chat format's audio
layout (``<|audio_start|><|audio_pad|><|audio_end|>``) and a Whisper feature
extractor with the toy encoder's mel bins.  ``full=True`` writes the full
``Qwen3OmniMoeForConditionalGeneration`` layout instead (``thinker.*`` keys,
no talker), with the chat template in the processor's ``chat_template.json``.

``deaf=True`` makes a model that ignores its input: every attention output
projection and expert down projection is zero, so each position's hidden
state is its own token's embedding, and the output head is set so that the
assistant turn's opening newline is followed by "B" and then the end of the
turn.  It answers "B" to every question, with or without audio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.testkit.random_checkpoints import QWEN3_ASR_CHAT_TEMPLATE, _byte_level_tokenizer

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>",
           "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
MEL_BINS = 16
DEAF_ANSWER = "B"


def thinker_config(vocab_size: int = 128, **token_ids: int) -> Any:
    """The thinker's config at toy sizes; ``token_ids`` sets the special token ids a tokenizer gives."""
    from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeThinkerConfig

    return Qwen3OmniMoeThinkerConfig(
        text_config={"vocab_size": vocab_size, "hidden_size": 32, "intermediate_size": 64, "moe_intermediate_size": 16,
                     "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                     "num_experts": 2, "num_experts_per_tok": 1, "tie_word_embeddings": False,
                     "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1], "interleaved": True}},
        # n_window 50: 100-frame chunks, the block the processor's audio token count assumes
        audio_config={"num_mel_bins": MEL_BINS, "encoder_layers": 1, "encoder_attention_heads": 2,
                      "encoder_ffn_dim": 32, "d_model": 16, "output_dim": 32, "n_window": 50, "n_window_infer": 800,
                      "downsample_hidden_size": 8},
        vision_config={"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 32,
                       "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 1,
                       "deepstack_visual_indexes": [0]},
        **token_ids,
    )


def _tokenizer(with_template: bool) -> tuple[Any, dict[str, int]]:
    from transformers import Qwen2TokenizerFast

    raw = _byte_level_tokenizer(SPECIAL, 512)
    ids = {t: raw.token_to_id(t) for t in SPECIAL}
    tok = Qwen2TokenizerFast(
        tokenizer_object=raw, unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        chat_template=QWEN3_ASR_CHAT_TEMPLATE if with_template else None,
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"},
    )
    return tok, ids


def _make_deaf(model: Any, tokenizer: Any, end_id: int) -> None:
    import torch

    text = model.model
    with torch.no_grad():
        for name, param in text.named_parameters():
            if name.endswith(("o_proj.weight", "experts.down_proj")):
                param.zero_()
        embed = text.embed_tokens.weight
        newline, answer = (tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))[0] for t in ("\n", DEAF_ANSWER))
        hidden = text.norm(embed[[newline, answer]])
        model.lm_head.weight[answer] = 20 * hidden[0] / hidden[0].norm()
        model.lm_head.weight[end_id] = 20 * hidden[1] / hidden[1].norm()


def build_thinker_folder(out: Path, *, seed: int = 0, full: bool = False, deaf: bool = False) -> Path:
    """Write a tiny random thinker (or full Qwen3-Omni, thinker only) folder with tokenizer and feature extractor."""
    import json

    import torch
    from transformers import WhisperFeatureExtractor
    from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeConfig
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
        Qwen3OmniMoeForConditionalGeneration,
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    tokenizer, ids = _tokenizer(with_template=not full)
    config = thinker_config(
        512, audio_token_id=ids["<|audio_pad|>"], audio_start_token_id=ids["<|audio_start|>"],
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], user_token_id=ids["<|im_start|>"],
    )
    torch.manual_seed(seed)
    if full:
        model = Qwen3OmniMoeForConditionalGeneration(
            Qwen3OmniMoeConfig(thinker_config=config.to_dict(), enable_audio_output=False)).eval()
        thinker = model.thinker
    else:
        model = thinker = Qwen3OmniMoeThinkerForConditionalGeneration(config).eval()
    if deaf:
        _make_deaf(thinker, tokenizer, ids["<|im_end|>"])
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    WhisperFeatureExtractor(feature_size=MEL_BINS).save_pretrained(out)
    if full:
        (out / "chat_template.json").write_text(json.dumps({"chat_template": QWEN3_ASR_CHAT_TEMPLATE}))
    return out
