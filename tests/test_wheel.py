"""The built wheel holds both packages at the top level, their static files and py.typed.

Builds the wheel with the project's own backend (hatchling, no build isolation) from
this checkout, so a file left out of the package data fails here, not on a user's machine.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = sorted(path.name for path in (ROOT / "aais_agui" / "static").iterdir())


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        timeout=300,
    )
    [wheel] = out.glob("aais_langgraph-*.whl")
    return wheel


def test_the_wheel_holds_both_packages_their_static_files_and_type_markers(
    tmp_path: Path,
) -> None:
    wheel = zipfile.ZipFile(_build_wheel(tmp_path))
    names = set(wheel.namelist())
    assert "aais_langgraph/__init__.py" in names
    assert "aais_agui/__init__.py" in names
    assert "aais_langgraph/py.typed" in names and "aais_agui/py.typed" in names
    assert {f"aais_agui/static/{name}" for name in STATIC} <= names
    assert "aais-client.js" in STATIC and "index.html" in STATIC
    assert not any(name.startswith(("src/", "tests/", "examples/")) for name in names)
    assert not any("node_modules" in name or "__pycache__" in name for name in names)
    [entry_points] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "aais-langgraph = aais_langgraph.cli:main" in text
    assert "aais-agui = aais_agui.cli:main" in text
