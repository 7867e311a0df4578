"""Every ```python block in the README and the docs runs as written.

Each page's blocks run in order in one namespace, in a fresh working directory, so a
later block may use what an earlier one defined and relative file names land in a
temporary directory. A block opts out only with ``<!-- not-run: reason -->`` on the
line right before its fence (see CONTRIBUTING.md).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^\s`]*)[^`]*$")
NOT_RUN = re.compile(r"^<!--\s*not-run:(?P<reason>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # of the first line of code, 1-based
    language: str
    code: str
    not_run: str | None  # the reason given, or None when the block runs


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page in order, with the not-run marker before each."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening.group("fence")
        start = index + 1
        end = start
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        previous = lines[index - 1] if index > 0 else ""
        marker = NOT_RUN.match(previous.strip())
        found.append(
            Block(
                page=page,
                line=start + 1,
                language=opening.group("info").lower(),
                code="\n".join(lines[start:end]) + "\n",
                not_run=marker.group("reason").strip() if marker else None,
            )
        )
        index = end + 1
    return found


def _page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _run(block: Block, namespace: dict[str, object]) -> None:
    # blank lines in front keep tracebacks on the page's own line numbers
    source = "\n" * (block.line - 1) + block.code
    code = compile(
        source, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    if code.co_flags & inspect.CO_COROUTINE:
        awaitable = eval(code, namespace)
        asyncio.run(awaitable)
    else:
        exec(code, namespace)


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.language in ("python", "py") and b.not_run is None]


@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=_page_id)
def test_python_blocks_run_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runnable = _runnable(page)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for block in runnable:
        _run(block, namespace)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_not_run_markers_give_a_reason_and_sit_on_a_python_block(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    marked = [b for b in blocks(page) if b.not_run is not None]
    assert len(marked) == len(re.findall(r"<!--\s*not-run:", text)), (
        "a not-run marker must be the line right before a fence"
    )
    for block in marked:
        assert block.language in ("python", "py"), f"line {block.line}: not a python block"
        assert block.not_run, f"line {block.line}: a not-run marker needs a reason"


def test_blocks_are_found_with_their_lines() -> None:
    page = ROOT / "README.md"
    [quickstart, *_] = [b for b in blocks(page) if b.language == "python"]
    first_code_line = page.read_text(encoding="utf-8").splitlines()[quickstart.line - 1]
    assert quickstart.code.splitlines()[0] == first_code_line


def test_a_failing_block_fails_and_a_marked_block_is_left_out(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not-run: needs a server -->\n```python\nraise SystemExit\n```\n\n"
        "```python\nx = 1\n```\n\n```python\nassert x == 2\n```\n",
        encoding="utf-8",
    )
    skipped, first, second = blocks(page)
    assert skipped.not_run == "needs a server" and first.not_run is None
    namespace: dict[str, object] = {}
    _run(first, namespace)
    with pytest.raises(AssertionError) as failure:
        _run(second, namespace)
    assert failure.traceback[-1].lineno + 1 == second.line  # reported at the page's line
