"""The toy policy: a tiny Qwen3 with a word-level tokenizer, built offline from a config and the committed
pretrained weights (:mod:`.pretrain`)."""

from __future__ import annotations

from pathlib import Path

from .speech import WORDS

BASE_WEIGHTS = Path(__file__).with_name("base_policy.safetensors")
"""The pretrained base's weights (:mod:`.pretrain` made them)."""

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "\n", "<unk>")
"""Qwen's chat markers: verl's Qwen token builder needs ``<|im_end|>`` and a one-token newline."""
FILLERS = ("user", "assistant", "say", "the", "a", "and", "now", "please", "so", "well")
"""Words of the chat and of padding, which the policy can say besides the toy words."""
MAX_ANSWER_TOKENS = 4
"""The longest answer, in tokens, in training and evaluation (the end of turn included)."""
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_policy(out_dir: str | Path, seed: int = 0, weights: Path | None = BASE_WEIGHTS) -> None:
    """Write the tiny policy (weights, config, tokenizer, chat template) to ``out_dir``.

    ``weights``: the pretrained base (:data:`BASE_WEIGHTS`, the default), or None for random
    weights (seeded by ``seed``).  Two attention heads of 64: vLLM's CPU attention takes head sizes from 32
    up (``vllm/_custom_ops.py`` line 3856 refuses 16).
    """
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the "Writing model shards" bar of a one-file model

    vocab = {token: i for i, token in enumerate((*SPECIAL, *FILLERS, *WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                   unk_token="<unk>")
    # Matched before the whitespace split, so the template's markers and newlines stay tokens
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "\n"]})
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out_dir)
    # transformers 5 rebuilds a Qwen2 model's tokenizer as Qwen2's byte-level BPE whatever tokenizer.json says
    # (qwen2 is in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS); for Qwen3 it trusts the saved word-level one.
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(vocab), hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256, tie_word_embeddings=True, bos_token_id=vocab["<|endoftext|>"],
        eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<|endoftext|>"], architectures=["Qwen3ForCausalLM"],
        head_dim=64,
    )
    model = Qwen3ForCausalLM(config)
    if weights is not None:
        from safetensors.torch import load_model

        load_model(model, str(weights))
    model.save_pretrained(out_dir)
