"""Convert a CTranslate2 Whisper model folder into a transformers checkpoint.

CTranslate2 can import transformers checkpoints but not export them, so this
module reads ``model.bin`` itself (the binary layout written by
``ctranslate2.specs.ModelSpec._serialize``, format version 6) and renames each
variable to its ``WhisperForConditionalGeneration`` parameter.  The fused
attention projections are split back into q/k/v; nothing is recomputed, so
the converted model holds exactly the same numbers (in the same dtype).

This lets the transformers and vLLM engines run the packaged ``tiny.en`` and
``base`` weights offline, and lets tests check that two engines read the
same weights the same way.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

SUPPORTED_BINARY_VERSIONS = (5, 6)
# CTranslate2's DataType enum order (ctranslate2/specs/model_spec.py `_dtype_to_type_id`).
_CT2_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")
_CONVERTED_MARKER = "ct2_source.json"
CONVERTER_VERSION = 2
"""Bumped when the output changes, so cached conversions are redone."""
# OpenAI's rule: multilingual Whisper vocabularies have 51865+ entries, English-only ones 51864.
_MULTILINGUAL_VOCAB_SIZE = 51865


class ConversionError(ValueError):
    """The folder is not a CTranslate2 Whisper model this converter understands."""


@dataclass(frozen=True)
class CT2Model:
    """The parsed contents of a CTranslate2 ``model.bin``."""

    spec_name: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]


class _Reader:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.off = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.off)
        self.off += struct.calcsize("<" + fmt)
        return int(value)

    def string(self) -> str:
        return self.take(self.unpack("H"))[:-1].decode("utf-8")  # the size includes the trailing NUL

    def take(self, size: int) -> bytes:
        if self.off + size > len(self.buf):
            raise ConversionError("model.bin is truncated")
        chunk = self.buf[self.off : self.off + size]
        self.off += size
        return chunk


def _to_array(raw: bytes, dtype_id: int, shape: list[int]) -> np.ndarray:
    try:
        dtype = _CT2_DTYPES[dtype_id]
    except IndexError:
        raise ConversionError(f"unknown CTranslate2 dtype id {dtype_id}") from None
    if dtype == "bfloat16":
        # numpy has no bfloat16: widen exactly by placing the 16 bits in the top half of a float32.
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    # bytearray, so the array is writable (torch.from_numpy warns on read-only memory).
    return np.frombuffer(bytearray(raw), dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


def read_ct2_model(model_bin: str | os.PathLike[str]) -> CT2Model:
    """Parse a CTranslate2 ``model.bin`` into named numpy arrays (bfloat16 widens to float32)."""
    with open(model_bin, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        r = _Reader(mm)
        try:
            version = r.unpack("I")
            if version not in SUPPORTED_BINARY_VERSIONS:
                raise ConversionError(
                    f"{model_bin}: CTranslate2 binary version {version} is not supported "
                    f"(supported: {', '.join(map(str, SUPPORTED_BINARY_VERSIONS))})"
                )
            spec_name = r.string()
            revision = r.unpack("I")
            variables: dict[str, np.ndarray] = {}
            for _ in range(r.unpack("I")):
                name = r.string()
                shape = [r.unpack("I") for _ in range(r.unpack("B"))]
                dtype_id = r.unpack("B")
                variables[name] = _to_array(r.take(r.unpack("I")), dtype_id, shape)
            aliases = {r.string(): r.string() for _ in range(r.unpack("I"))}  # the alias is read first (key first)
        except (struct.error, UnicodeDecodeError, ValueError) as exc:
            if isinstance(exc, ConversionError):
                raise
            raise ConversionError(f"{model_bin} is not a CTranslate2 model file: {exc}") from None
    return CT2Model(spec_name, revision, variables, aliases)


def _attention(prefix: str, src: dict[str, np.ndarray], base: str, fused: int) -> dict[str, np.ndarray]:
    """Map one attention block; ``fused`` is 3 for self-attention (qkv) and 2 for cross-attention (kv)."""
    if fused == 3:
        q_w, k_w, v_w = np.split(src[f"{base}/linear_0/weight"], 3)
        q_b, _k_b, v_b = np.split(src[f"{base}/linear_0/bias"], 3)
        out_linear = 1
    else:
        q_w, q_b = src[f"{base}/linear_0/weight"], src[f"{base}/linear_0/bias"]
        k_w, v_w = np.split(src[f"{base}/linear_1/weight"], 2)
        _k_b, v_b = np.split(src[f"{base}/linear_1/bias"], 2)
        out_linear = 2
    # Whisper's key projection has no bias: CTranslate2 stores zeros there when it fuses.
    return {f"{prefix}.q_proj.weight": q_w, f"{prefix}.q_proj.bias": q_b, f"{prefix}.k_proj.weight": k_w,
            f"{prefix}.v_proj.weight": v_w, f"{prefix}.v_proj.bias": v_b,
            **_pair(f"{prefix}.out_proj", src, f"{base}/linear_{out_linear}", "weight", "bias")}


def _pair(dst: str, src: dict[str, np.ndarray], base: str, weight: str = "gamma", bias: str = "beta"
          ) -> dict[str, np.ndarray]:
    """A layer's weight and bias (a layer norm's gamma and beta, unless named otherwise)."""
    return {f"{dst}.weight": src[f"{base}/{weight}"], f"{dst}.bias": src[f"{base}/{bias}"]}


def _layer_count(src: dict[str, np.ndarray], side: str) -> int:
    pattern = re.compile(rf"^{side}/layer_(\d+)/")
    return 1 + max(int(m.group(1)) for name in src if (m := pattern.match(name)))


def whisper_state_dict(model: CT2Model) -> dict[str, np.ndarray]:
    """HF ``WhisperForConditionalGeneration`` state dict (``proj_out`` tied, so omitted)."""
    if model.spec_name != "WhisperSpec":
        raise ConversionError(f"expected a CTranslate2 WhisperSpec model, got {model.spec_name}")
    src = model.variables
    if any(name.endswith("weight_scale") for name in src):
        raise ConversionError("quantized (int8/int16) CTranslate2 models cannot be converted exactly; use a float one")
    sd: dict[str, np.ndarray] = {"model.decoder.embed_tokens.weight": src["decoder/embeddings/weight"]}
    for conv in ("conv1", "conv2"):
        sd.update(_pair(f"model.encoder.{conv}", src, f"encoder/{conv}", "weight", "bias"))
    # The encoder's and the decoder's layers are alike, but for the decoder's cross-attention.
    for side in ("encoder", "decoder"):
        sd[f"model.{side}.embed_positions.weight"] = src[f"{side}/position_encodings/encodings"]
        sd.update(_pair(f"model.{side}.layer_norm", src, f"{side}/layer_norm"))
        for i in range(_layer_count(src, side)):
            p, b = f"model.{side}.layers.{i}", f"{side}/layer_{i}"
            sd.update(_attention(f"{p}.self_attn", src, f"{b}/self_attention", 3))
            sd.update(_pair(f"{p}.self_attn_layer_norm", src, f"{b}/self_attention/layer_norm"))
            if side == "decoder":
                sd.update(_attention(f"{p}.encoder_attn", src, f"{b}/attention", 2))
                sd.update(_pair(f"{p}.encoder_attn_layer_norm", src, f"{b}/attention/layer_norm"))
            sd.update(_pair(f"{p}.final_layer_norm", src, f"{b}/ffn/layer_norm"))
            sd.update(_pair(f"{p}.fc1", src, f"{b}/ffn/linear_0", "weight", "bias"))
            sd.update(_pair(f"{p}.fc2", src, f"{b}/ffn/linear_1", "weight", "bias"))
    if model.aliases.get("decoder/projection/weight", "decoder/embeddings/weight") != "decoder/embeddings/weight":
        raise ConversionError("the output projection is not tied to the token embeddings")
    return sd


def _vocabulary(ct2_dir: Path) -> list[str]:
    path = ct2_dir / "vocabulary.txt"
    if path.exists():
        lines = path.read_text(encoding="utf-8").split("\n")
        return lines[:-1] if lines and lines[-1] == "" else lines
    path = ct2_dir / "vocabulary.json"
    if path.exists():
        return list(json.loads(path.read_text(encoding="utf-8")))
    raise ConversionError(f"{ct2_dir} has no vocabulary.txt or vocabulary.json")


def is_current_conversion(out_dir: str | os.PathLike[str]) -> bool:
    """Whether ``out_dir`` holds a complete conversion made by this converter version."""
    marker = Path(out_dir) / _CONVERTED_MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("converter_version") == CONVERTER_VERSION
    except (OSError, ValueError):
        return False


def _generation_config(config: Any, ct2_config: dict[str, Any], vocab: list[str], token_id: dict[str, int]) -> Any:
    """Whisper's generation settings from the CTranslate2 config: special tokens, suppression, languages."""
    from transformers import GenerationConfig

    eot, sot = token_id["<|endoftext|>"], token_id["<|startoftranscript|>"]
    # English-only checkpoints also list language tokens in their CTranslate2 config; they must not be forced.
    multilingual = config.vocab_size >= _MULTILINGUAL_VOCAB_SIZE
    lang_ids = list(ct2_config.get("lang_ids", [])) if multilingual else []
    return GenerationConfig(
        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot,
        suppress_tokens=config.suppress_tokens, begin_suppress_tokens=config.begin_suppress_tokens,
        no_timestamps_token_id=token_id["<|notimestamps|>"], prev_sot_token_id=token_id.get("<|startofprev|>"),
        max_initial_timestamp_index=50, max_length=config.max_target_positions, is_multilingual=multilingual,
        lang_to_id={vocab[i]: i for i in lang_ids},
        task_to_id={task: token_id[f"<|{task}|>"] for task in ("transcribe", "translate") if f"<|{task}|>" in token_id},
        alignment_heads=[list(h) for h in ct2_config.get("alignment_heads", [])], return_timestamps=False)


def _write_whole(out: Path, parts: list[Any], marker: dict[str, Any]) -> None:
    """Save ``parts`` (``save_pretrained``) and the conversion marker into a temporary folder renamed to
    ``out``, so ``out`` is either complete or absent."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for part in parts:
            part.save_pretrained(tmp)
        (tmp / _CONVERTED_MARKER).write_text(json.dumps(marker), encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def ct2_whisper_to_transformers(ct2_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write a transformers Whisper checkpoint (model, generation config, processor) for a CTranslate2 folder.

    The folder must hold ``model.bin``, ``config.json``, ``tokenizer.json`` and
    a vocabulary file, as faster-whisper's converted models do.  The output is
    written to a temporary folder and renamed, so ``out_dir`` is either
    complete or absent.  Returns ``out_dir``.
    """
    import torch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    src_dir, out = Path(ct2_dir), Path(out_dir)
    for name in ("model.bin", "config.json", "tokenizer.json"):
        if not (src_dir / name).exists():
            raise ConversionError(f"{src_dir} has no {name}: not a faster-whisper CTranslate2 folder")
    ct2 = read_ct2_model(src_dir / "model.bin")
    ct2_config = json.loads((src_dir / "config.json").read_text(encoding="utf-8"))
    vocab = _vocabulary(src_dir)
    token_id = {tok: i for i, tok in enumerate(vocab)}
    sd = whisper_state_dict(ct2)

    embed = sd["model.decoder.embed_tokens.weight"]
    eot, sot = token_id["<|endoftext|>"], token_id["<|startoftranscript|>"]
    num_heads = {side: int(ct2.variables[f"{side}/num_heads"]) for side in ("encoder", "decoder")}
    config = WhisperConfig(
        vocab_size=int(embed.shape[0]), num_mel_bins=int(sd["model.encoder.conv1.weight"].shape[1]),
        d_model=int(embed.shape[1]), encoder_layers=_layer_count(ct2.variables, "encoder"),
        decoder_layers=_layer_count(ct2.variables, "decoder"), encoder_attention_heads=num_heads["encoder"],
        decoder_attention_heads=num_heads["decoder"],
        encoder_ffn_dim=int(sd["model.encoder.layers.0.fc1.weight"].shape[0]),
        decoder_ffn_dim=int(sd["model.decoder.layers.0.fc1.weight"].shape[0]),
        max_source_positions=int(sd["model.encoder.embed_positions.weight"].shape[0]),
        max_target_positions=int(sd["model.decoder.embed_positions.weight"].shape[0]),
        pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, decoder_start_token_id=sot,
        suppress_tokens=list(ct2_config.get("suppress_ids", [])),
        begin_suppress_tokens=list(ct2_config.get("suppress_ids_begin", [])), tie_word_embeddings=True)
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=config.num_mel_bins),
                                 tokenizer=WhisperTokenizer(tokenizer_file=str(src_dir / "tokenizer.json")))

    from transformers import WhisperForConditionalGeneration

    dtype = torch.from_numpy(embed[:1]).dtype
    with torch.device("meta"):
        model = WhisperForConditionalGeneration(config)
    tensors = {name: torch.from_numpy(np.ascontiguousarray(value)) for name, value in sd.items()}
    missing, unexpected = model.load_state_dict(tensors, strict=False, assign=True)
    missing = [m for m in missing if m != "proj_out.weight"]
    if missing or unexpected:
        raise ConversionError(f"parameter mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    # mypy cannot bind transformers' .to() (wrapped with functools.wraps) as a method.
    model.to(dtype)  # type: ignore[arg-type]
    model.generation_config = _generation_config(config, ct2_config, vocab, token_id)

    _write_whole(out, [model, processor], {"source": str(src_dir.resolve()), "spec": ct2.spec_name,
                                           "revision": ct2.revision, "converter_version": CONVERTER_VERSION})
    log.info("converted CTranslate2 Whisper to transformers", extra={"source": str(src_dir), "target": str(out)})
    return out
