"""No merge left its conflict markers in a text file of the project: Python would not parse with them
(ruff says so), but Markdown, YAML and JSON docs can carry them unnoticed (the README once did)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".md", ".yaml", ".yml", ".json", ".toml", ".txt", ".cfg", ".ini", ".py", ".sh"}
# the two markers that name a side (a bare "=======" may underline a Markdown heading)
MARKER = re.compile(r"^(<{7}|>{7}) ", re.MULTILINE)


def _text_files() -> list[Path]:
    """The project's tracked text files (``git ls-files``); without git, those under its own folders."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        paths = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        folders = ("layers", "functions", "tests", "statemachines", "events", "deploy", "bench", "docs")
        paths = [*ROOT.glob("*"), *(p for f in folders for p in (ROOT / f).rglob("*"))]
    return [p for p in paths if p.is_file() and p.suffix in SUFFIXES]


def test_no_text_file_carries_merge_conflict_markers() -> None:
    files = _text_files()
    assert any(p.name == "README.md" for p in files)  # the walk sees the project
    marked = [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for p in files
        for text in [p.read_text(encoding="utf-8", errors="replace")]
        for m in MARKER.finditer(text)
    ]
    assert marked == []
