"""deploy/find_python.py: the Lambda runtime's Python 3.13, however it is installed, or one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "find_python.py"


def fake_python(path: Path, *, is_313: bool = True) -> Path:
    """An executable answering the version probe the way a real 3.13 (or another version) does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "$0"\n' if is_313 else "#!/bin/sh\necho\n")
    path.chmod(0o755)
    return path


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path / "home")}
    return subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env={**base, **env}, check=False
    )


def test_python313_on_path_wins(tmp_path: Path) -> None:
    binary = fake_python(tmp_path / "bin" / "python3.13")
    fake_python(tmp_path / "pyenv" / "versions" / "3.13.5" / "bin" / "python3.13")
    done = run(tmp_path, PATH=str(tmp_path / "bin"), PYENV_ROOT=str(tmp_path / "pyenv"))
    assert done.returncode == 0 and done.stdout.strip() == os.path.realpath(binary)


def test_a_python313_on_path_that_is_not_313_is_passed_over_for_pyenvs_newest(tmp_path: Path) -> None:
    fake_python(tmp_path / "bin" / "python3.13", is_313=False)  # e.g. a pyenv shim selecting nothing
    fake_python(tmp_path / "pyenv" / "versions" / "3.13.0" / "bin" / "python3.13")
    newest = fake_python(tmp_path / "pyenv" / "versions" / "3.13.10" / "bin" / "python3.13")
    fake_python(tmp_path / "pyenv" / "versions" / "3.12.9" / "bin" / "python3.13")
    done = run(tmp_path, PATH=str(tmp_path / "bin"), PYENV_ROOT=str(tmp_path / "pyenv"))
    assert done.stdout.strip() == os.path.realpath(newest), done.stderr


def test_uv_and_asdf_installs_are_found(tmp_path: Path) -> None:
    uv = fake_python(tmp_path / "uv" / "cpython-3.13.1-linux-x86_64-gnu" / "bin" / "python3.13")
    assert run(tmp_path, UV_PYTHON_INSTALL_DIR=str(tmp_path / "uv")).stdout.strip() == os.path.realpath(uv)
    asdf = fake_python(tmp_path / "home" / ".asdf" / "installs" / "python" / "3.13.2" / "bin" / "python3.13")
    assert run(tmp_path).stdout.strip() == os.path.realpath(asdf)


def test_missing_everywhere_is_one_line_and_status_1(tmp_path: Path) -> None:
    done = run(tmp_path, PYENV_ROOT=str(tmp_path / "nothing"))
    if done.returncode == 0:  # this machine has a system python3.13 in /usr/bin or /usr/local/bin
        assert done.stdout.strip().startswith(("/usr/", "/opt/"))
        return
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: Python 3.13 (the Lambda runtime) not found") and "PYTHON313=" in line


def test_an_explicit_python313_that_is_not_313_is_refused(tmp_path: Path) -> None:
    wrong = fake_python(tmp_path / "py" / "python3", is_313=False)
    fake_python(tmp_path / "bin" / "python3.13")
    done = run(tmp_path, PATH=str(tmp_path / "bin"), PYTHON313=str(wrong))
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: PYTHON313={wrong} is not a working Python 3.13"
