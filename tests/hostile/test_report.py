"""The tally's helpers count what they observe, a hostile input that got through included."""

from __future__ import annotations

import pytest

from . import report
from .report import (
    DOUBLE_RUNS_EXPECTED,
    Tally,
    failing_rows,
    hostile_input,
    record,
    refused,
    tallies,
)

(IDEMPOTENT,) = DOUBLE_RUNS_EXPECTED


@pytest.fixture(autouse=True)
def own_tally(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests record into a table of their own, not the run's."""
    monkeypatch.setattr(report, "_TALLIES", {})


def test_refused_counts_the_expected_refusal_and_hands_it_over() -> None:
    with refused("t", ValueError) as caught:
        raise ValueError("no")
    assert caught.value.args == ("no",)
    assert tallies() == {"t": Tally(tried=1)}


def test_refused_counts_an_accepted_input_as_failed_open_and_fails() -> None:
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"), refused("t", ValueError):
        pass
    assert tallies() == {"t": Tally(tried=1, failed_open=1)}


def test_refused_takes_failed_open_from_the_observation_when_given() -> None:
    with refused("t", ValueError, opened=lambda: True):
        raise ValueError("refused, but the action ran anyway")
    with pytest.raises(pytest.fail.Exception), refused("t", ValueError, opened=lambda: False):
        pass
    assert tallies() == {"t": Tally(tried=2, failed_open=1)}


def test_refused_counts_another_exception_as_a_5xx_and_lets_it_through() -> None:
    with pytest.raises(KeyError), refused("t", ValueError):
        raise KeyError("crash")
    assert tallies() == {"t": Tally(tried=1, server_errors=1)}


def test_hostile_input_observes_however_the_block_ends() -> None:
    effects: list[str] = []
    with hostile_input("t", opened=lambda: bool(effects)):
        effects.append("ran")
    with pytest.raises(RuntimeError), hostile_input("t", opened=lambda: bool(effects)):
        raise RuntimeError("crash")
    with pytest.raises(AssertionError), hostile_input("t", opened=lambda: False):
        raise AssertionError("a failed check is not a 5xx")
    assert tallies() == {"t": Tally(tried=3, failed_open=2, server_errors=1)}


def test_failing_rows_names_each_count_that_must_be_0_and_is_not() -> None:
    found = {
        "clean": Tally(tried=5),
        "open": Tally(tried=5, failed_open=1, server_errors=2),
        "twice": Tally(tried=2, double_runs=1),
        IDEMPOTENT: Tally(tried=2, double_runs=2),
    }
    assert failing_rows(found) == ["open: 1 failed open, 2 5xx", "twice: 1 double runs"]


def test_the_idempotent_rows_exception_covers_double_runs_only() -> None:
    found = {IDEMPOTENT: Tally(tried=2, failed_open=1, double_runs=2)}
    assert failing_rows(found) == [f"{IDEMPOTENT}: 1 failed open"]


def test_failing_rows_judges_what_this_run_recorded() -> None:
    assert failing_rows() == []
    record("t", 1, server_errors=1)
    assert failing_rows() == ["t: 1 5xx"]
