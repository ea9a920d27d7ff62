"""Print the path of a Python 3.13 interpreter (the Lambda runtime's), however it is installed.

``sam build`` builds the functions and the layer with ``python3.13``; this finds one and prints its real
path (the Makefile puts a ``python3.13`` link to it first on ``sam build``'s PATH). Looked for, in order:

1. ``$PYTHON313`` (a path or a command), when set;
2. ``python3.13`` on ``PATH`` (a plain install, Homebrew, the deadsnakes PPA, an active pyenv/asdf shim);
3. pyenv versions ``3.13.*`` (``$PYENV_ROOT``, else ``pyenv root``, else ``~/.pyenv``), newest first;
4. uv-managed Pythons (``uv python find 3.13``, then ``$UV_PYTHON_INSTALL_DIR`` / ``~/.local/share/uv/python``);
5. asdf installs (``$ASDF_DATA_DIR`` or ``~/.asdf``) ``installs/python/3.13.*``;
6. ``/usr/local/bin``, ``/usr/bin``, ``/opt/homebrew/bin``.

Each candidate is run and must report version 3.13. None found: one line on stderr, exit status 1.
Runs on any Python 3.8+ (the machine's ``python3``).

    python3 deploy/find_python.py            # -> /home/me/.pyenv/versions/3.13.0/bin/python3.13
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping

NAME = "python3.13"
PROBE = "import sys; print(sys.version_info[:2] == (3, 13) and sys.executable or '')"


def _version_key(path: str) -> list[int]:
    match = re.search(r"3\.13\.(\d+)", path)
    return [int(match.group(1)) if match else -1]


def _newest(pattern: str) -> list[str]:
    return sorted(glob.glob(os.path.expanduser(pattern)), key=_version_key, reverse=True)


def _run(args: list[str], env: Mapping[str, str] | None = None) -> str:
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def candidates(env: Mapping[str, str]) -> Iterator[str]:
    if env.get("PYTHON313"):
        yield env["PYTHON313"]
        return
    on_path = shutil.which(NAME, path=env.get("PATH"))
    if on_path:
        yield on_path
    pyenv_root = env.get("PYENV_ROOT") or _run(["pyenv", "root"]) or "~/.pyenv"
    yield from _newest(os.path.join(pyenv_root, "versions", "3.13.*", "bin", NAME))
    found = _run(["uv", "python", "find", "3.13"]) if shutil.which("uv", path=env.get("PATH")) else ""
    if found:
        yield found
    uv_dir = env.get("UV_PYTHON_INSTALL_DIR") or "~/.local/share/uv/python"
    yield from _newest(os.path.join(uv_dir, "cpython-3.13.*", "bin", NAME))
    asdf_dir = env.get("ASDF_DATA_DIR") or "~/.asdf"
    yield from _newest(os.path.join(asdf_dir, "installs", "python", "3.13.*", "bin", NAME))
    for directory in ("/usr/local/bin", "/usr/bin", "/opt/homebrew/bin"):
        yield os.path.join(directory, NAME)


def _probe(command: str, env: Mapping[str, str]) -> str:
    """The real path of ``command`` if it runs and is Python 3.13, else ``""``."""
    if not os.path.isfile(command) or not os.access(command, os.X_OK):
        return ""
    # PYENV_VERSION unset: a pyenv shim answers for the version pyenv selects, not one we forced.
    probe_env = {k: v for k, v in env.items() if k != "PYENV_VERSION"}
    executable = _run([command, "-c", PROBE], probe_env)
    return os.path.realpath(executable) if executable else ""


def find(env: Mapping[str, str] | None = None) -> str | None:
    """The real path of the first candidate that runs and is 3.13, or None."""
    environment: Mapping[str, str] = os.environ if env is None else env
    for candidate in candidates(environment):
        found = _probe(shutil.which(candidate, path=environment.get("PATH")) or candidate, environment)
        if found:
            return found
    return None


def main() -> int:
    found = find()
    if found is None and os.environ.get("PYTHON313"):
        print(f"error: PYTHON313={os.environ['PYTHON313']} is not a working Python 3.13", file=sys.stderr)
        return 1
    if found is None:
        print(
            "error: Python 3.13 (the Lambda runtime) not found: install it (python.org, your package manager, "
            "pyenv install 3.13, uv python install 3.13, asdf) or set PYTHON313=/path/to/python3.13",
            file=sys.stderr,
        )
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
