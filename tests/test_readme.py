"""The README's quickstart runs exactly as written, and its commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    assert f"\n## {title}\n" in text, f"README has no '## {title}' section"
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def _quickstart() -> str:
    blocks = _blocks(_section("Quickstart"), "python")
    assert blocks, "README has no python block under Quickstart"
    return blocks[0]


def test_readme_quickstart_runs_and_approves() -> None:
    namespace: dict[str, object] = {"__name__": "readme_quickstart"}
    exec(compile(_quickstart(), str(README), "exec"), namespace)
    resolution = namespace["resolution"]
    assert getattr(resolution, "approved", False) is True


def test_readme_quickstart_is_about_thirty_lines() -> None:
    assert len(_quickstart().strip().splitlines()) <= 45


def test_install_and_test_commands_are_the_ones_ci_runs() -> None:
    ci_lines = [line.strip() for line in CI.read_text(encoding="utf-8").splitlines()]
    install = [b.strip() for b in _blocks(_section("Install"), "bash")]
    assert "bash scripts/install.sh" in install
    assert [b.strip() for b in _blocks(_section("Test"), "bash")] == ["python -m pytest"]
    assert "bash scripts/install.sh" in ci_lines
    assert "python -m pytest" in ci_lines


def test_run_command_starts_the_demo() -> None:
    assert _blocks(_section("Run the demo"), "bash")[0].strip() == "aais-agui demo"


def test_relative_links_point_at_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert local, "README links to no repository file"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert missing == []


def test_every_docs_page_is_linked_from_the_readme_and_the_docs_index() -> None:
    pages = sorted(path.name for path in (ROOT / "docs").glob("*.md") if path.name != "index.md")
    readme = README.read_text(encoding="utf-8")
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert [page for page in pages if f"(docs/{page}" not in readme] == []
    assert [page for page in pages if f"]({page}" not in index] == []


def _extras() -> set[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def _extras_named(text: str) -> set[str]:
    assert "Extras:" in text
    sentence = text.split("Extras:", 1)[1].split(".\n", 1)[0].split("\n\n", 1)[0]
    while re.search(r"\([^()]*\)", sentence):  # what each brings, in parentheses
        sentence = re.sub(r"\([^()]*\)", "", sentence)
    return set(re.findall(r"`([a-z][a-z0-9_-]*)`", sentence))


def test_the_readme_names_every_extra_of_pyproject() -> None:
    assert _extras_named(README.read_text(encoding="utf-8")) == _extras()


def test_the_quickstart_names_every_extra_of_pyproject() -> None:
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    assert _extras_named(quickstart) == _extras()
