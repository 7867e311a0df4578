"""Execution records: one claim per approval, dead claims turn unknown, humans settle them."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.ledger import (
    AuditEntry,
    Execution,
    Ledger,
    LedgerIntegrityError,
    ResolutionWrite,
    SqliteLedger,
)
from aais_langgraph.ledger.executions import (
    ExecutionState,
    claim_change,
    execution_audit,
    finish_change,
    reconcile_change,
)

from .envelopes import approval, request_envelope

_ids = itertools.count()


def claim(
    ledger: Ledger, holder: str, now: float, *, rid: str = "apr_1", retry: bool = False
) -> Execution | None:
    change = claim_change(rid, holder, thread_id="t-1", ttl=30, now=now, retry=retry)
    return ledger.update_execution(rid, change)


def test_a_first_claim_takes_the_execution(ledger: Ledger) -> None:
    record = claim(ledger, "run_a", 1000.0)

    assert record == Execution("apr_1", "t-1", "executing", "run_a", 1, 1000.0, 1030.0, 1000.0)
    assert ledger.execution_with_entry("apr_1")[0] == record


def test_a_live_claim_is_not_taken_by_another_run(ledger: Ledger) -> None:
    claim(ledger, "run_a", 1000.0)

    record = claim(ledger, "run_b", 1029.0, retry=True)

    assert record is not None and (record.state, record.holder) == ("executing", "run_a")


def test_a_dead_claim_turns_unknown_and_is_not_taken(ledger: Ledger) -> None:
    claim(ledger, "run_a", 1000.0)

    record = claim(ledger, "run_b", 1030.0)

    assert record is not None and (record.state, record.holder) == ("unknown", "run_a")
    assert ledger.list_executions() == [record]
    assert ledger.list_executions(thread_id="t-2") == []


def test_an_idempotent_run_takes_over_a_dead_claim(ledger: Ledger) -> None:
    claim(ledger, "run_a", 1000.0)

    record = claim(ledger, "run_b", 1030.0, retry=True)

    assert record is not None and (record.state, record.holder, record.attempt) == (
        "executing",
        "run_b",
        2,
    )


def test_a_finished_execution_is_not_claimed_again(ledger: Ledger) -> None:
    claim(ledger, "run_a", 1000.0)
    ledger.update_execution("apr_1", finish_change(1001.0))

    record = claim(ledger, "run_b", 2000.0)

    assert record is not None and record.state == "executed"
    assert ledger.list_executions() == []


def test_reconciling_settles_only_an_unknown_or_dead_claim(ledger: Ledger) -> None:
    claim(ledger, "run_a", 1000.0)
    live = ledger.update_execution("apr_1", reconcile_change("done", "ops", 1001.0))
    assert live is not None and live.state == "executing"  # the run may still be running

    settled = ledger.update_execution("apr_1", reconcile_change("retry", "ops", 1031.0))

    assert settled is not None and (settled.state, settled.reconciled_by) == ("retry", "ops")
    assert claim(ledger, "run_b", 1032.0, retry=True) == settled  # never claimed again
    assert ledger.list_executions(states=("retry",)) == [settled]


def test_nothing_is_stored_for_an_unknown_request(ledger: Ledger) -> None:
    assert ledger.update_execution("apr_x", finish_change(1.0)) is None
    assert ledger.execution_with_entry("apr_x")[0] is None


_operation = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(["a", "b", "c"]), st.booleans()),
    st.tuples(st.just("finish"), st.none(), st.none()),
    st.tuples(st.just("reconcile"), st.sampled_from(["done", "retry"]), st.none()),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(_operation, st.integers(0, 40)), max_size=12))
def test_execution_records_follow_the_model_and_one_holder_runs_without_retry(
    ledger: Ledger, steps: list[tuple[tuple[str, object, object], int]]
) -> None:
    """Any sequence of claims (idempotent or not), finishes and reconciliations gives
    the same records on the backend as on the pure model; with no idempotent claim at
    most one run ever holds the execution; a reconciled record never changes again."""
    rid = f"apr_h{next(_ids)}"
    model: Execution | None = None
    now = 1000.0
    holders: set[str] = set()
    retried = False
    for (kind, first, second), pause in steps:
        now += pause
        if kind == "claim":
            change = claim_change(
                rid, str(first), thread_id="t", ttl=10, now=now, retry=bool(second)
            )
            retried = retried or bool(second)
        elif kind == "finish":
            change = finish_change(now)
        else:
            change = reconcile_change(first, "ops", now)  # type: ignore[arg-type]
        before = model
        model = change(model)
        stored = ledger.update_execution(rid, change)
        assert stored == model and ledger.execution_with_entry(rid)[0] == model
        if model is not None and model.state == "executing":
            holders.add(model.holder)
        if before is not None and before.state in ("done", "retry"):
            assert model == before
    assert retried or len(holders) <= 1


_STATE_SETS: list[tuple[ExecutionState, ...]] = [
    (),
    ("executing",),
    ("unknown",),
    ("unknown", "executing"),
    ("executed", "done", "retry"),
    ("executing", "executing"),
    ("executing", "executed", "unknown", "done", "retry"),
]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(_operation, st.sampled_from(["1", "2", "3", "4"]), st.integers(0, 40)),
        max_size=16,
    )
)
def test_listed_executions_are_the_records_in_those_states(
    ledger: Ledger, steps: list[tuple[tuple[str, object, object], str, int]]
) -> None:
    """Whatever the records went through, listing some states (of one thread, or of all)
    gives exactly the stored records in those states, in start order."""
    prefix = f"apr_l{next(_ids)}_"
    now = 1000.0
    for (kind, first, second), number, pause in steps:
        now += pause
        rid = prefix + number
        if kind == "claim":
            thread = f"t-{int(number) % 2}"
            change = claim_change(
                rid, str(first), thread_id=thread, ttl=10, now=now, retry=bool(second)
            )
        elif kind == "finish":
            change = finish_change(now)
        else:
            change = reconcile_change(first, "ops", now)  # type: ignore[arg-type]
        ledger.update_execution(rid, change)
        records = [r for r in ledger.contents().executions if r.request_id.startswith(prefix)]
        for states in _STATE_SETS:
            for thread_id in (None, "t-0", "t-1"):
                listed = [
                    record
                    for record in ledger.list_executions(states=states, thread_id=thread_id)
                    if record.request_id.startswith(prefix)
                ]
                expected = sorted(
                    (
                        record
                        for record in records
                        if record.state in states and thread_id in (None, record.thread_id)
                    ),
                    key=lambda record: (record.started_at, record.request_id),
                )
                assert listed == expected, (states, thread_id)


def test_an_idempotent_retry_counts_attempts(ledger: Ledger) -> None:
    first = claim(ledger, "run_a", 1000.0)
    assert first is not None
    claim(ledger, "run_b", 1031.0)  # dead: unknown
    retried = claim(ledger, "run_c", 1032.0, retry=True)

    assert retried == replace(
        first, holder="run_c", attempt=2, started_at=1032.0, live_until=1062.0, updated_at=1032.0
    )


def test_an_approval_and_its_claim_are_recorded_together(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1"))
    change = claim_change("apr_1", "run_a", thread_id="t-1", ttl=30, now=1000.0, retry=False)

    recorded, created, record = ledger.record_resolution_claiming(approval_of("apr_1"), change)

    assert created and recorded.envelope["resolution"]["outcome"] == "approved"
    assert record == Execution("apr_1", "t-1", "executing", "run_a", 1, 1000.0, 1030.0, 1000.0)
    assert ledger.execution_with_entry("apr_1")[0] == record
    # A second resolver finds the first resolution and claims nothing.
    again = claim_change("apr_1", "run_b", thread_id="t-1", ttl=30, now=1001.0, retry=True)
    assert ledger.record_resolution_claiming(approval_of("apr_1"), again)[1:] == (False, None)
    assert ledger.execution_with_entry("apr_1")[0] == record


def test_a_resolution_that_is_not_an_approval_claims_nothing(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1"))
    change = claim_change("apr_1", "run_a", thread_id="t-1", ttl=30, now=1000.0, retry=False)

    _, created, record = ledger.record_resolution_claiming(
        approval_of("apr_1", outcome="denied"), change
    )

    assert created and record is None and ledger.execution_with_entry("apr_1")[0] is None


def test_a_failed_resolution_write_leaves_no_claim(ledger: Ledger) -> None:
    change = claim_change("apr_9", "run_a", thread_id="t-1", ttl=30, now=1000.0, retry=False)

    with pytest.raises(KeyError):
        ledger.record_resolution_claiming(approval_of("apr_9"), change)

    assert ledger.execution_with_entry("apr_9")[0] is None


def approval_of(request_id: str, *, outcome: str = "approved") -> ResolutionWrite:
    return approval(request_envelope(request_id), outcome=outcome)


def _execution_entries(ledger: Ledger) -> list[AuditEntry]:
    return [entry for entry in ledger.audit_entries() if entry.kind == "execution"]


def test_every_stored_change_is_one_audit_entry_holding_the_row(ledger: Ledger) -> None:
    claimed = claim(ledger, "run_a", 1000.0)
    claim(ledger, "run_b", 1001.0)  # a live claim elsewhere: nothing changes
    finished = ledger.update_execution("apr_1", finish_change(1002.0))
    assert claimed is not None and finished is not None

    entries = _execution_entries(ledger)

    assert [entry.payload for entry in entries] == [
        execution_audit(claimed),
        execution_audit(finished),
    ]
    assert ledger.execution_with_entry("apr_1") == (finished, entries[-1])
    assert ledger.audit_tip() == (entries[-1].index, entries[-1].entry_hash)
    assert ledger.contents().executions == [finished]


def test_a_claim_riding_in_the_resolution_is_audited_after_it(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1"))
    change = claim_change("apr_1", "run_a", thread_id="t-1", ttl=30, now=1000.0, retry=False)

    _, _, record = ledger.record_resolution_claiming(approval_of("apr_1"), change)

    kinds = [entry.kind for entry in ledger.audit_entries()]
    assert kinds[-2:] == ["resolved", "execution"] and record is not None
    assert _execution_entries(ledger)[0].payload == execution_audit(record)


def test_a_change_is_refused_when_the_row_and_its_entry_disagree(
    ledger: Ledger, sqlite_path: Path
) -> None:
    if not isinstance(ledger, SqliteLedger):
        pytest.skip("raw SQL on the file; both SQL backends in tests/authority/test_tamper.py")
    claim(ledger, "run_a", 1000.0)
    tip = ledger.audit_tip()
    raw = ledger._conn  # the ledger's own connection: what any writer of the file can do

    raw.execute("UPDATE aais_executions SET state = 'executed'")
    with pytest.raises(LedgerIntegrityError, match="does not match"):
        ledger.update_execution("apr_1", reconcile_change("done", "ops", 2000.0))
    raw.execute("DELETE FROM aais_executions")
    with pytest.raises(LedgerIntegrityError, match="missing"):
        claim(ledger, "run_b", 2000.0)

    assert ledger.audit_tip() == tip and ledger.execution_with_entry("apr_1")[0] is None
