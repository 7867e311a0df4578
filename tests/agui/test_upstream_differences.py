"""The documented differences from ag-ui-langgraph's own tests, and the check keeping them honest.

``scripts/ci_agui_upstream.py`` (run by ``.ci/run``) runs that suite against stock and
against ``AAISLangGraphAgent``; these tests pin how it judges the two runs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "ci_agui_upstream", ROOT / "scripts" / "ci_agui_upstream.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = load_check()
STOCK = {"t::ok": "passed", "t::ours_fail": "passed", "t::listed": "passed", "t::env": "failed"}


def test_every_listed_difference_names_a_test_and_a_reason() -> None:
    listed = check.documented_differences(check.DIFFERENCES)
    assert listed, "the list is empty: remove the step or the file"
    for test_id, reason in listed.items():
        assert test_id.startswith("tests/test_") and "::" in test_id
        assert len(reason) > 10


def test_a_failure_that_is_not_listed_fails_the_check() -> None:
    ours = {**STOCK, "t::ours_fail": "failed", "t::listed": "failed"}
    undocumented, stale = check.compare(STOCK, ours, {"t::listed": "why"})
    assert undocumented == ["t::ours_fail"] and stale == []


def test_a_failure_on_stock_too_is_no_verdict() -> None:
    ours = {**STOCK, "t::env": "failed", "t::listed": "failed"}
    assert check.compare(STOCK, ours, {"t::listed": "why"}) == ([], [])


@pytest.mark.parametrize(
    ("listed", "outcome", "says"),
    [
        ("t::listed", "passed", "passed against AAISLangGraphAgent"),
        ("t::env", "failed", "not passing on stock either"),
        ("t::gone", None, "no such test"),
    ],
)
def test_a_listed_test_that_is_no_difference_fails_the_check(
    listed: str, outcome: str | None, says: str
) -> None:
    ours = {test: result for test, result in {**STOCK, listed: outcome}.items() if result}
    undocumented, stale = check.compare(STOCK, ours, {listed: "why"})
    assert undocumented == [] and len(stale) == 1 and says in stale[0]


def test_a_line_without_a_reason_is_refused(tmp_path: Path) -> None:
    listing = tmp_path / "differences.txt"
    listing.write_text("# comment\n\ntests/test_a.py::test_b\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"differences.txt:3: expected"):
        check.documented_differences(listing)
