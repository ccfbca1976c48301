"""A tiny random Qwen3-TTS (12 Hz, custom voice) from qwen-tts's own classes, and its codec-0 policy.

``build_tiny_qwen3_tts`` assembles the real ``Qwen3TTSForConditionalGeneration``
(talker + code predictor) and the real 12 Hz speech tokenizer
(``Qwen3TTSTokenizerV2Model``, codes -> 24 kHz waveform) from their config
classes at toy sizes, with a byte-level text tokenizer, all in memory.

Weights are random, as in any freshly built model, with one correction:
Hugging Face's ``post_init`` initialises a model for a checkpoint to be loaded
over it, and the speech tokenizer's codebooks start at exactly zero (they are
running averages in a trained codec), so every code decodes to the same
silence.  The decoder therefore gets PyTorch's default layer init and unit
normal codebooks: distinct codes decode to distinct audio.

``talker_prompt`` and ``codec0_logprobs`` rebuild, with gradients, the input
embeddings qwen-tts's ``generate`` feeds the talker (prefill, then per frame
the sum of the frame's codebook embeddings plus the trailing text), so the
log-probability of each generated codec-0 token can be taken by one
teacher-forced forward pass, as a GRPO actor does on codec-0.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

CODEBOOK_SIZE = 64
"""Entries per codebook; codec ids at and above it are the talker's control tokens."""
NUM_CODE_GROUPS = 4
"""Codebooks per 80 ms frame: codec-0 from the talker, the rest from the code predictor."""
# The talker's control tokens live in the last 1024 ids of its vocabulary, which qwen-tts
# suppresses while sampling (all but EOS).
TALKER_VOCAB = CODEBOOK_SIZE + 1024
CODEC_PAD, CODEC_BOS, CODEC_EOS = CODEBOOK_SIZE, CODEBOOK_SIZE + 1, CODEBOOK_SIZE + 2
CODEC_THINK, CODEC_NOTHINK, CODEC_THINK_BOS, CODEC_THINK_EOS = (CODEBOOK_SIZE + i for i in range(3, 7))
LANGUAGE_ID = CODEBOOK_SIZE + 8
SPEAKER = "tiny"
SPEAKER_ID = CODEBOOK_SIZE + 9
SPEAKER_DIM = 32
"""Width of the Base model's speaker embedding: the talker's hidden size, whose speaker slot it fills."""

TEXT_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "assistant", "<tts_pad>", "<tts_text_bos>",
                "<tts_text_eod>")
"""``assistant`` is one token, as in Qwen's vocabulary: qwen-tts slices the role prefix as three tokens."""


def import_qwen_tts() -> Any:
    """Import qwen_tts as the TTS environment has it: its torchaudio is the real one (scripts/envs/tts.sh)."""
    return importlib.import_module("qwen_tts")


@dataclass
class TinyQwen3TTS:
    model: Any  # Qwen3TTSForConditionalGeneration, speech tokenizer loaded
    processor: Any  # Qwen3TTSProcessor

    def tokenize(self, text: str) -> torch.Tensor:
        """(1, N) ids of the assistant turn, formatted as qwen-tts's ``Qwen3TTSModel`` does."""
        prompt = f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"
        return self.processor(text=prompt, return_tensors="pt")["input_ids"]


def _text_tokenizer() -> tuple[Any, dict[str, int]]:
    from transformers import Qwen2TokenizerFast

    from tests.testkit.random_checkpoints import _byte_level_tokenizer

    raw = _byte_level_tokenizer(TEXT_SPECIAL, 512)
    ids = {t: raw.token_to_id(t) for t in TEXT_SPECIAL}
    tok = Qwen2TokenizerFast(tokenizer_object=raw, unk_token=None, bos_token=None, eos_token="<|im_end|>",
                             pad_token="<|endoftext|>")
    return tok, ids


def _speech_tokenizer(seed: int) -> Any:
    from qwen_tts import Qwen3TTSTokenizer
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        EuclideanCodebook,
        Qwen3TTSTokenizerV2Model,
    )

    config = Qwen3TTSTokenizerV2Config(
        encoder_config={"hidden_size": 16, "num_filters": 4, "num_hidden_layers": 1, "intermediate_size": 32,
                        "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8,
                        "codebook_size": CODEBOOK_SIZE, "codebook_dim": 16, "num_quantizers": NUM_CODE_GROUPS,
                        "vector_quantization_hidden_dimension": 16, "upsample_groups": 16,
                        "upsampling_ratios": [8, 6, 5, 4], "frame_rate": 12.5},
        decoder_config={"codebook_size": CODEBOOK_SIZE, "codebook_dim": 16, "hidden_size": 32, "latent_dim": 32,
                        "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 8,
                        "intermediate_size": 64, "num_hidden_layers": 1, "num_quantizers": NUM_CODE_GROUPS,
                        "decoder_dim": 64},
        encoder_valid_num_quantizers=NUM_CODE_GROUPS,
    )
    torch.manual_seed(seed)
    model = Qwen3TTSTokenizerV2Model(config).eval()
    for module in model.decoder.modules():
        if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d, nn.Linear)):
            module.reset_parameters()
        elif isinstance(module, EuclideanCodebook):
            nn.init.normal_(module.embedding_sum)
    tokenizer = Qwen3TTSTokenizer()
    tokenizer.model, tokenizer.config, tokenizer.device = model, config, torch.device("cpu")
    return tokenizer


def build_tiny_qwen3_tts(seed: int = 0, model_type: str = "custom_voice") -> TinyQwen3TTS:
    """A random-weight Qwen3-TTS with one speaker (``SPEAKER``) and English.

    ``model_type="base"`` builds the voice-cloning Base model instead, with a
    tiny ECAPA speaker encoder whose embedding fills the talker's speaker slot
    (``SPEAKER_DIM`` wide), as Qwen3-TTS-12Hz-0.6B-Base has.
    """
    from qwen_tts.core.models import (
        Qwen3TTSConfig,
        Qwen3TTSForConditionalGeneration,
        Qwen3TTSProcessor,
    )

    tokenizer, ids = _text_tokenizer()
    head_dim = 8
    talker = {
        "vocab_size": TALKER_VOCAB, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head_dim,
        "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1], "interleaved": True},
        "num_code_groups": NUM_CODE_GROUPS, "text_vocab_size": 512, "text_hidden_size": 32,
        "codec_eos_token_id": CODEC_EOS, "codec_think_id": CODEC_THINK, "codec_nothink_id": CODEC_NOTHINK,
        "codec_think_bos_id": CODEC_THINK_BOS, "codec_think_eos_id": CODEC_THINK_EOS, "codec_pad_id": CODEC_PAD,
        "codec_bos_id": CODEC_BOS, "spk_id": {SPEAKER: SPEAKER_ID}, "spk_is_dialect": {SPEAKER: False},
        "codec_language_id": {"english": LANGUAGE_ID},
        "code_predictor_config": {
            "vocab_size": CODEBOOK_SIZE, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": head_dim,
            "num_code_groups": NUM_CODE_GROUPS,
        },
    }
    speaker_encoder = None
    if model_type == "base":
        speaker_encoder = {"mel_dim": 128, "enc_dim": SPEAKER_DIM, "enc_channels": [16, 16, 16, 16, 48],
                           "enc_kernel_sizes": [5, 3, 3, 3, 1], "enc_dilations": [1, 2, 3, 4, 1],
                           "enc_attention_channels": 8, "enc_res2net_scale": 2, "enc_se_channels": 8}
    config = Qwen3TTSConfig(
        talker_config=talker,
        speaker_encoder_config=speaker_encoder,
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size="tiny",
        tts_model_type=model_type,
        im_start_token_id=ids["<|im_start|>"],
        im_end_token_id=ids["<|im_end|>"],
        tts_pad_token_id=ids["<tts_pad>"],
        tts_bos_token_id=ids["<tts_text_bos>"],
        tts_eos_token_id=ids["<tts_text_eod>"],
    )
    torch.manual_seed(seed)
    model = Qwen3TTSForConditionalGeneration(config).eval()
    model.load_speech_tokenizer(_speech_tokenizer(seed))
    return TinyQwen3TTS(model=model, processor=Qwen3TTSProcessor(tokenizer=tokenizer))


GENERATION_CONFIG = {"do_sample": False, "subtalker_dosample": False, "max_new_tokens": 30, "repetition_penalty": 1.0}
"""``generation_config.json`` of a saved tiny model: greedy, 2.4 s at most, so CPU synthesis stays quick."""


def run_speaker_embedding(tts: TinyQwen3TTS) -> torch.Tensor:
    """The run's speaker embedding, as the speaker tool makes it: a Base model's encoder on a 24 kHz reference."""
    import numpy as np

    t = np.arange(48000, dtype=np.float32) / 24000
    reference = (0.2 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    return tts.model.extract_speaker_embedding(reference, 24000).float().reshape(-1)


def save_tiny_qwen3_tts(tts: TinyQwen3TTS, folder: Path) -> Path:
    """Write ``tts`` as a Hugging Face folder that ``Qwen3TTSModel.from_pretrained`` loads, as released.

    The layout of Qwen3-TTS-12Hz-0.6B-Base: ``config.json`` and
    ``model.safetensors`` (talker, code predictor, speaker encoder),
    ``generation_config.json``, the text tokenizer, and the 12 Hz speech
    tokenizer under ``speech_tokenizer/`` with its feature extractor.
    """
    import json

    from transformers import EncodecFeatureExtractor

    folder.mkdir(parents=True, exist_ok=True)
    tts.model.save_pretrained(folder, safe_serialization=True)
    # qwen-tts's speaker-encoder config has no model_type, so save_pretrained writes ''
    # there, which its own __init__ then refuses; the released config.json has none.
    config = json.loads((folder / "config.json").read_text())
    config.get("speaker_encoder_config", {}).pop("model_type", None)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    tts.processor.save_pretrained(folder)
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    speech = folder / "speech_tokenizer"
    tts.model.speech_tokenizer.model.save_pretrained(speech, safe_serialization=True)
    EncodecFeatureExtractor(feature_size=1, sampling_rate=24000).save_pretrained(speech)
    return folder


@dataclass
class TalkerPrompt:
    """What qwen-tts's ``generate`` feeds the talker for one utterance, rebuilt with gradients."""

    embeds: torch.Tensor  # (1, L, D): the prefill
    trailing_text: torch.Tensor  # (1, S, D): added to frame t's input while t < S
    tts_pad: torch.Tensor  # (1, 1, D): added to every later frame's input


def talker_prompt(model: Any, input_id: torch.Tensor, speaker: str, language: str) -> TalkerPrompt:
    """The talker's input for a custom-voice request in qwen-tts's non-streaming mode.

    Mirrors ``Qwen3TTSForConditionalGeneration.generate`` (speaker from the
    codec vocabulary, no instruction, ``non_streaming_mode=True``); the test
    checks it against the logits the talker produced while generating.
    """
    talker, cfg, tcfg = model.talker, model.config, model.config.talker_config
    codec = talker.get_input_embeddings()

    def text(ids: torch.Tensor) -> torch.Tensor:
        return talker.text_projection(talker.get_text_embeddings()(ids))

    def codec_ids(ids: list[int]) -> torch.Tensor:
        return codec(torch.tensor([ids], dtype=input_id.dtype, device=input_id.device))

    bos, eos, pad = text(
        torch.tensor(
            [[cfg.tts_bos_token_id, cfg.tts_eos_token_id, cfg.tts_pad_token_id]],
            dtype=input_id.dtype,
            device=input_id.device,
        )
    ).chunk(3, dim=1)
    language_id = None if language.lower() == "auto" else tcfg.codec_language_id[language.lower()]
    if language_id is None:
        tags = [tcfg.codec_nothink_id, tcfg.codec_think_bos_id, tcfg.codec_think_eos_id]
    else:
        tags = [tcfg.codec_think_id, tcfg.codec_think_bos_id, language_id, tcfg.codec_think_eos_id]
    speaker_embed = codec_ids([tcfg.spk_id[speaker.lower()]])
    codec_in = torch.cat([codec_ids(tags), speaker_embed, codec_ids([tcfg.codec_pad_id, tcfg.codec_bos_id])], dim=1)
    # role tokens, then the codec tags under tts_pad (tts_bos on the last), then the whole text under codec_pad
    head = torch.cat([pad.expand(-1, codec_in.shape[1] - 2, -1), bos], dim=1) + codec_in[:, :-1]
    body_ids = input_id[:, 3:-5]
    body = torch.cat([text(body_ids), eos], dim=1) + codec_ids([tcfg.codec_pad_id] * (body_ids.shape[1] + 1))
    embeds = torch.cat([text(input_id[:, :3]), head, body, pad + codec_ids([tcfg.codec_bos_id])], dim=1)
    return TalkerPrompt(embeds=embeds, trailing_text=pad, tts_pad=pad)


def frame_embeddings(model: Any, codes: torch.Tensor) -> torch.Tensor:
    """(T, G) codes -> (T, D): the sum of each frame's codebook embeddings, the talker's next input."""
    talker = model.talker
    out = talker.get_input_embeddings()(codes[:, 0])
    for g, embedding in enumerate(talker.code_predictor.get_input_embeddings(), start=1):
        out = out + embedding(codes[:, g])
    return out


@dataclass
class Codec0Batch:
    """Teacher-forced codec-0 logits of a group of generated utterances, right-padded."""

    logits: torch.Tensor  # (B, K, V): logits[b, k] is the talker's distribution over codec-0 of frame k
    targets: torch.Tensor  # (B, K): the generated codec-0 ids (EOS last when the utterance ended)
    mask: torch.Tensor  # (B, K): 1 where a target exists

    def logprobs(
        self, temperature: float = 1.0, suppress_from: int | None = None, eos_id: int | None = None
    ) -> torch.Tensor:
        """(B, K) log-probs of the targets, zero where masked.

        ``suppress_from``/``eos_id`` restrict the support as qwen-tts's sampler
        does (control tokens ``>= suppress_from`` removed, except EOS), so these
        are the log-probs of the distribution the tokens were sampled from.
        """
        logits = self.logits / temperature
        if suppress_from is not None:
            banned = torch.arange(logits.shape[-1], device=logits.device) >= suppress_from
            if eos_id is not None:
                banned[eos_id] = False
            logits = logits.masked_fill(banned, float("-inf"))
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, self.targets.unsqueeze(-1)).squeeze(-1)
        return logp.masked_fill(self.mask == 0, 0.0)


def teacher_forced_codec0(
    model: Any, prompts: list[TalkerPrompt], codes: list[torch.Tensor], ended: list[bool]
) -> Codec0Batch:
    """One forward pass of the talker over prompt + generated frames, with gradients.

    ``codes[b]`` is utterance b's (T, G) frames as ``generate`` returns them
    (EOS frame removed); ``ended[b]`` says whether it stopped on EOS (then EOS
    is scored after the last frame) rather than on the token limit.
    """
    talker = model.talker
    eos = model.config.talker_config.codec_eos_token_id
    sequences, targets, starts = [], [], []
    for prompt, frames, stop in zip(prompts, codes, ended, strict=True):
        t = frames.shape[0]
        extra = prompt.trailing_text[0, : min(t, prompt.trailing_text.shape[1])]
        extra = torch.cat([extra, prompt.tts_pad[0].expand(t - extra.shape[0], -1)], dim=0)
        sequences.append(torch.cat([prompt.embeds[0], frame_embeddings(model, frames) + extra], dim=0))
        target = frames[:, 0]
        if stop:
            target = torch.cat([target, target.new_tensor([eos])])
        targets.append(target)
        starts.append(prompt.embeds.shape[1] - 1)
    length = max(s.shape[0] for s in sequences)
    k_max = max(t.shape[0] for t in targets)
    batch = sequences[0].new_zeros(len(sequences), length, sequences[0].shape[-1])
    attention = torch.zeros(len(sequences), length, dtype=torch.long)
    for b, seq in enumerate(sequences):
        batch[b, : seq.shape[0]] = seq
        attention[b, : seq.shape[0]] = 1
    logits = talker(inputs_embeds=batch, attention_mask=attention, use_cache=False).logits
    out = logits.new_zeros(len(sequences), k_max, logits.shape[-1])
    tgt = torch.zeros(len(sequences), k_max, dtype=torch.long)
    mask = torch.zeros(len(sequences), k_max, dtype=torch.long)
    for b, (start, target) in enumerate(zip(starts, targets, strict=True)):
        k = target.shape[0]
        out[b, :k] = logits[b, start : start + k]
        tgt[b, :k], mask[b, :k] = target, 1
    return Codec0Batch(logits=out, targets=tgt, mask=mask)
