"""The README's quickstart runs exactly as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def _quickstart() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "README has no python block under Quickstart"
    return match.group(1)


def test_readme_quickstart_runs_and_approves() -> None:
    namespace: dict[str, object] = {"__name__": "readme_quickstart"}
    exec(compile(_quickstart(), str(README), "exec"), namespace)
    resolution = namespace["resolution"]
    assert getattr(resolution, "approved", False) is True


def test_readme_quickstart_is_about_thirty_lines() -> None:
    assert len(_quickstart().strip().splitlines()) <= 45
