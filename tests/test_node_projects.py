"""The Node projects the tests drive say truthfully which files start them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = sorted(
    path
    for folder in ("tests", "examples")
    for path in (ROOT / folder).rglob("package.json")
    if "node_modules" not in path.parts
)
NAMED_FILE = re.compile(r"(?<![\w/.-])((?:tests|examples)/[\w./-]+\.(?:py|mjs|js))\b")


def manifest(path: Path) -> dict[str, object]:
    loaded = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("package", PROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_file_a_node_project_names_exists(package: Path) -> None:
    described = str(manifest(package).get("description", ""))
    named = NAMED_FILE.findall(described)
    missing = [name for name in named if not (ROOT / name).is_file()]
    assert not missing, f"{package.relative_to(ROOT)} names files that are not there: {missing}"


@pytest.mark.parametrize("package", PROJECTS, ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_a_node_projects_main_file_exists(package: Path) -> None:
    main = manifest(package).get("main")
    assert main is None or (package.parent / str(main)).is_file(), main


def test_the_openid_provider_tests_start_the_file_its_project_names() -> None:
    from support.oidc_provider import PROJECT, START_FILE

    assert manifest(PROJECT / "package.json")["main"] == START_FILE
    assert (PROJECT / START_FILE).is_file()
