"""What verl 0.9.1 and vLLM 0.28 lack to train an audio-input Qwen2-Audio policy, patched from outside site-packages.

Imported by every verl process of the thinker-shaped loop through
``VERL_USE_EXTERNAL_MODULES`` (:mod:`.thinker` adds :data:`MODULE` after the
CPU mode's module); nothing in site-packages is edited and each patch names
the line it works around.  None of this is CPU-specific: a GPU run of the same
loop needs it too.

* verl builds a multimodal processor only for the vision processors it knows
  (``verl/utils/tokenizer/tokenizer.py`` lines 208-234; any other class raises
  inside a ``try`` and the processor silently becomes ``None``), so an
  ``audios`` column then fails at ``verl/utils/dataset/rl_dataset.py`` line 323.
* verl recomputes a rollout's processor inputs from the *decoded* prompt
  (``verl/experimental/agent_loop/agent_loop.py`` lines 887-906), where each
  clip is already expanded into a run of audio tokens; it collapses such runs
  for images and videos only, and ``Qwen2AudioProcessor`` wants one audio
  token per clip.
* The ``audios`` column reaches the processor and the rollout as it is stored
  (``rl_dataset.py`` ``_extract_audio_info``, lines 447-462): a file path,
  which neither the feature extractor nor vLLM reads.  Paths are loaded here,
  at the feature extractor's rate, as Qwen's own loaders do.
* verl's agent loop treats a processor as multimodal only when it has an
  image processor (``verl/utils/tokenizer/continuous_token_wiring.py`` lines
  313-315) and then refuses the audio (``agent_loop.py`` lines 267-273);
  an audio processor gets verl's default multimodal builder, which renders
  audio through the processor (``continuous_token.py`` lines 1136-1181).
* verl picks the actor's class from the config (``verl/utils/model.py`` lines
  693-718); ``qwen2_audio`` falls through to ``AutoModel``, the headless
  ``Qwen2AudioModel``, which has no logits.
* verl's FSDP2 shards every ``nn.Embedding`` on its own when embeddings are not
  tied (``verl/utils/fsdp_utils.py`` lines 564-569), so its weight is gathered
  only when the module is called; Qwen2-Audio's encoder reads
  ``embed_positions.weight`` without calling it
  (``transformers/models/qwen2_audio/modeling_qwen2_audio.py`` lines 369-371)
  and gets a sharded DTensor.  Those stay with their parent's shard group.
* verl sends the actor's parameter names (transformers 5 layout:
  ``model.language_model.*``, ``lm_head.*``) to vLLM as they are
  (``verl/utils/model.py`` ``convert_weight_keys`` reads transformers 4's
  ``_checkpoint_conversion_mapping`` only), and vLLM's Qwen2-Audio loads the
  hub layout (``language_model.model.*``) with no mapper
  (``vllm/model_executor/models/qwen2_audio.py`` lines 487-489).
* vLLM's Qwen2-Audio adds the rate to the processor keywords verl already
  carries it in, and fails (``qwen2_audio.py`` lines 258-261).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..clips import load_clip

MODULE = "audio_reward.trainer_plugin.toy_task.audio_support"
"""The module to name in ``VERL_USE_EXTERNAL_MODULES``."""

VLLM_QWEN2_AUDIO = "vllm.model_executor.models.qwen2_audio"
# transformers 5 names (and what transformers 5.10 writes back to disk) -> the hub layout vLLM loads
_WEIGHT_PREFIXES = (
    ("language_model.model.model.", "language_model.model."),
    ("language_model.model.lm_head.", "language_model.lm_head."),
    ("model.language_model.", "language_model.model."),
    ("model.audio_tower.", "audio_tower."),
    ("model.multi_modal_projector.", "multi_modal_projector."),
    ("lm_head.", "language_model.lm_head."),
)


def vllm_weight_name(name: str) -> str:
    """A Qwen2-Audio parameter name as vLLM's Qwen2-Audio loads it (names already in that layout pass)."""
    for old, new in _WEIGHT_PREFIXES:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _collapse_audio_runs(text: Any, audio_token: str) -> Any:
    run = re.compile(f"(?:{re.escape(audio_token)})+")
    if isinstance(text, str):
        return run.sub(audio_token, text)
    return [run.sub(audio_token, t) for t in text]


def _processor_class() -> type:
    """``Qwen2AudioProcessor`` that takes verl's keywords and a prompt whose clips are already expanded."""
    from transformers import Qwen2AudioProcessor

    class VerlQwen2AudioProcessor(Qwen2AudioProcessor):  # type: ignore[misc, unused-ignore]
        """Drops verl's empty ``images``/``videos`` and collapses expanded audio-token runs to one per clip."""

        def __call__(self, text: Any = None, audio: Any = None, images: Any = None, videos: Any = None,
                     **kwargs: Any) -> Any:
            if images is not None or videos is not None:
                raise ValueError("Qwen2-Audio takes no images or videos")
            if audio is not None and text is not None:
                text = _collapse_audio_runs(text, self.audio_token)
            return super().__call__(text=text, audio=audio, **kwargs)

    return VerlQwen2AudioProcessor


def qwen2_audio_processor() -> None:
    """verl's ``hf_processor`` returns a (verl-ready) ``Qwen2AudioProcessor`` for a Qwen2-Audio folder."""
    import verl.utils.tokenizer as tokenizer_module

    original = tokenizer_module.hf_processor

    def hf_processor(name_or_path: Any, **kwargs: Any) -> Any:
        from transformers import AutoConfig, AutoProcessor

        config = None  # a folder AutoConfig cannot read is not a Qwen2-Audio one
        with contextlib.suppress(OSError, ValueError):
            config = AutoConfig.from_pretrained(name_or_path, **kwargs)
        if getattr(config, "model_type", None) != "qwen2_audio":
            return original(name_or_path, **kwargs)
        processor = AutoProcessor.from_pretrained(name_or_path, **kwargs)
        processor.__class__ = _processor_class()
        processor.config = config  # as verl sets it (line 205)
        return processor

    _install(tokenizer_module, "hf_processor", hf_processor, rebind=True)


AUDIO_RATE = 16_000
"""Whisper's rate, which Qwen2-Audio's feature extractor and vLLM's Qwen2-Audio both expect."""


def audio_paths_loaded() -> None:
    """Clips named by path in the ``audios`` column reach the processor and the rollout as 16 kHz waveforms."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    original = RLHFDataset.__dict__["_extract_audio_info"].__func__

    def _extract_audio_info(cls: type, messages: list[dict]) -> list[Any] | None:
        audios = original(cls, messages)
        return None if audios is None else [load_clip(a, AUDIO_RATE) if isinstance(a, str) else a for a in audios]

    _install(RLHFDataset, "_extract_audio_info", classmethod(_extract_audio_info))


def audio_processor_is_multimodal() -> None:
    """verl's agent loop counts a processor with an audio feature extractor as multimodal, as one with images."""
    from verl.utils.tokenizer import continuous_token_wiring as wiring

    original = wiring._is_multimodal_processor

    def _is_multimodal_processor(processor: Any | None) -> bool:
        audio = getattr(processor, "feature_extractor", None) is not None and hasattr(processor, "audio_token")
        return bool(original(processor) or audio)

    _install(wiring, "_is_multimodal_processor", _is_multimodal_processor)


def qwen2_audio_actor_class() -> None:
    """verl's actor class for a Qwen2-Audio config is ``Qwen2AudioForConditionalGeneration`` (with its LM head)."""
    import verl.utils.model as model_module

    original = model_module.get_hf_auto_model_class

    def get_hf_auto_model_class(hf_config: Any) -> Any:
        if getattr(hf_config, "model_type", None) == "qwen2_audio":
            from transformers import Qwen2AudioForConditionalGeneration

            return Qwen2AudioForConditionalGeneration
        return original(hf_config)

    _install(model_module, "get_hf_auto_model_class", get_hf_auto_model_class, rebind=True)


def positions_not_sharded_alone() -> None:
    """verl's FSDP2 leaves position tables read through ``.weight`` (never called) in their parent's group."""
    import verl.utils.fsdp_utils as fsdp_utils

    original = fsdp_utils._select_fsdp2_wrap_targets

    def _select_fsdp2_wrap_targets(model: Any, classes: Any) -> list[Any]:
        tables = {id(m) for name, m in model.named_modules() if name.rsplit(".", 1)[-1] == "embed_positions"}
        return [m for m in original(model, classes) if id(m) not in tables]

    _install(fsdp_utils, "_select_fsdp2_wrap_targets", _select_fsdp2_wrap_targets)


def _patch_vllm_qwen2_audio(module: Any) -> None:
    _drop_sampling_rate(module.Qwen2AudioMultiModalProcessor)
    cls = module.Qwen2AudioForConditionalGeneration
    original: Callable[..., Any] = cls.load_weights

    def load_weights(self: Any, weights: Iterable[tuple[str, Any]]) -> Any:
        return original(self, ((vllm_weight_name(name), tensor) for name, tensor in weights))

    _install(cls, "load_weights", load_weights)


def _drop_sampling_rate(cls: type) -> None:
    """vLLM's Qwen2-Audio sets ``sampling_rate`` itself and fails when verl passes it too.

    ``dict(**mm_kwargs, sampling_rate=...)`` at ``vllm/model_executor/models/qwen2_audio.py``
    lines 258-261 raises ``TypeError`` for verl's ``mm_processor_kwargs``, which carry the
    feature extractor's rate (``verl/utils/tokenizer/continuous_token.py`` lines 1078-1084).
    """
    original: Callable[..., Any] = cls._call_hf_processor  # type: ignore[attr-defined]

    def _call_hf_processor(self: Any, prompt: Any, mm_data: Any, mm_kwargs: Any, tok_kwargs: Any) -> Any:
        mm_kwargs = {k: v for k, v in mm_kwargs.items() if k != "sampling_rate"}
        return original(self, prompt, mm_data, mm_kwargs, tok_kwargs)

    _install(cls, "_call_hf_processor", _call_hf_processor)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches vLLM's Qwen2-Audio module right after it is first imported (vLLM's model modules load lazily)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != VLLM_QWEN2_AUDIO:
            return None
        sys.meta_path.remove(self)  # find the real spec without this finder, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module: Any) -> None:
            exec_module(module)
            _patch_vllm_qwen2_audio(module)

        spec.loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec


def vllm_qwen2_audio_weight_names() -> None:
    """vLLM's Qwen2-Audio loads weights named as transformers 5 names them (verl's weight sync sends those)."""
    if VLLM_QWEN2_AUDIO in sys.modules:
        _patch_vllm_qwen2_audio(sys.modules[VLLM_QWEN2_AUDIO])
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _install(owner: Any, name: str, replacement: Any, *, rebind: bool = False) -> None:
    """Set ``owner.name`` to ``replacement``, which wraps what is there now, once: a second call finds the mark and
    leaves it.  ``rebind``: also in every loaded verl module that imported the original by name."""
    original = getattr(owner, name)
    if getattr(original, "_audio_reward", False):
        return
    function = getattr(replacement, "__func__", replacement)  # a classmethod is marked on its function
    functools.update_wrapper(function, getattr(original, "__func__", original))
    function._audio_reward = True
    setattr(owner, name, replacement)
    if not rebind:
        return
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("verl.") and module is not None:
            for attr, value in list(getattr(module, "__dict__", {}).items()):
                if value is original:
                    setattr(module, attr, replacement)


def enable() -> None:
    """Apply every patch of this module (idempotent)."""
    vllm_qwen2_audio_weight_names()
    qwen2_audio_processor()
    audio_paths_loaded()
    audio_processor_is_multimodal()
    qwen2_audio_actor_class()
    positions_not_sharded_alone()


enable()
