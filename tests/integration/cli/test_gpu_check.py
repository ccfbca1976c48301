"""The GPU check's install step (scripts/gpu_wheelhouse.py install) as the device runs it, on a small wheelhouse.

The whole command, with the real wheelhouse, runs in CI (scripts/test.sh); here the rules of the install:
an overlay venv that sees the interpreter's own packages and puts its own first, wheels from the folder
only (no index), a missing one named, and what to run when this Python has no wheelhouse.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from scripts import gpu_wheelhouse as wh

ROOT = Path(__file__).resolve().parents[3]
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def pure_wheel(folder: Path, name: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module ``name`` that sets ``VALUE = 1``, written by hand (no build, no index)."""
    dist_info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": "VALUE = 1\n",
        f"{dist_info}/METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist_info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{dist_info}/RECORD"])
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


def wheelhouse(tmp: Path, needs: str, requires: tuple[str, ...] = ("numpy",)) -> Path:
    wheels = tmp / "check" / "wheels" / TAG
    wheels.mkdir(parents=True)
    pure_wheel(wheels, "gpucheckdemo", requires=requires)
    (wheels / "needs.txt").write_text(needs)
    return tmp / "check"


def install(folder: Path, venv: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, str(ROOT / "scripts" / "gpu_wheelhouse.py"), "install", "--dir",
                           str(folder), "--venv", str(venv)], capture_output=True, text=True, timeout=300, check=False)


def test_wheels_go_into_an_overlay_that_sees_this_interpreter_s_packages(tmp_path: Path) -> None:
    done = install(wheelhouse(tmp_path, "gpucheckdemo\n"), tmp_path / "venv")
    assert done.returncode == 0, done.stderr
    interpreter = done.stdout.strip().splitlines()[-1]
    assert interpreter == str(tmp_path / "venv" / "bin" / "python")
    # numpy, which the wheel requires, is this interpreter's: seen as installed, not looked for in the folder.
    probe = ("import sys, json, numpy, gpucheckdemo; "
             "print(json.dumps([numpy.__file__, gpucheckdemo.__file__, sys.path]))")
    numpy_file, demo_file, path = json.loads(subprocess.run([interpreter, "-c", probe], capture_output=True,
                                                            text=True, check=True).stdout)
    own = str(tmp_path / "venv")
    assert demo_file.startswith(own) and not numpy_file.startswith(own)
    base = next(p for p in path if p and numpy_file.startswith(p))
    assert path.index(next(p for p in path if p.startswith(own))) < path.index(base)  # the overlay's own come first


def test_a_wheel_the_folder_lacks_fails_the_install_naming_it(tmp_path: Path) -> None:
    done = install(wheelhouse(tmp_path, "gpucheckdemo\ngpucheck-not-in-the-folder\n"), tmp_path / "venv")
    assert done.returncode != 0
    assert "gpucheck-not-in-the-folder" in done.stderr and "No matching distribution" in done.stderr


def test_no_wheelhouse_for_this_python_says_what_to_run(tmp_path: Path) -> None:
    done = install(tmp_path / "empty", tmp_path / "venv")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert done.returncode == 2
    assert f"bash scripts/gpu_check.sh --prepare --python-version {version}" in done.stderr


def test_the_overlay_runs_the_interpreter_s_own_pth_files(tmp_path: Path) -> None:
    """The device's packages may rely on .pth files in their folder (editable installs): the overlay runs them."""
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    site = wh.site_folders(str(base / "bin" / "python"))[0]
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "from_pth.py").write_text("VALUE = 2\n")
    Path(site, "extra.pth").write_text(f"{extra}\n")
    overlay = wh.overlay_venv(tmp_path / "overlay", str(base / "bin" / "python"))
    subprocess.run([str(overlay), "-c", "import from_pth"], check=True)


def test_an_interpreter_without_pip_gets_the_bundled_one(tmp_path: Path) -> None:
    """A venv made by uv has no pip: the overlay takes the standard library's, offline."""
    base = tmp_path / "base"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True)
    done = install(wheelhouse(tmp_path, "gpucheckdemo\n", requires=()), tmp_path / "venv", str(base / "bin" / "python"))
    assert done.returncode == 0, done.stderr
    subprocess.run([done.stdout.strip().splitlines()[-1], "-c", "import gpucheckdemo"], check=True)
