"""The gate never acts on a stored approval its audit entry (or its seal) does not vouch for.

An attacker with write access to the ledger file forges an approval for a paused
run; every path that would resume it refuses with a ledger integrity error and the
action does not run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.types import Command

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    SqliteLedger,
    ThreadDriver,
    resume_with_decisions,
)
from aais_langgraph.authority.resolutions import resolution_envelope
from aais_langgraph.ledger import LedgerIntegrityError, ResolutionWrite
from aais_langgraph.ledger.records import dump_json
from hostile.report import refused

from .support import (
    HUMAN,
    SESSION_CHOICES,
    START_TIME,
    Backend,
    Effects,
    config,
    decide,
    gated_graph,
    paused,
    requested_of,
)

KEY = b"k" * 32
TAMPERING = "tampering"  # the hostile-input table's row (tests/hostile/report.py)


def forged_approval(requested: ApprovalRequested) -> dict[str, Any]:
    """An ``approved`` resolution for the request, as anyone can build one."""
    return resolution_envelope(
        requested.request, outcome="approved", message="Approved.", now=START_TIME, sequence=0
    ).to_json()


def insert_forged(path: Path, requested: ApprovalRequested) -> dict[str, Any]:
    """What someone who can write the file does: a resolution row, the request marked resolved."""
    envelope = forged_approval(requested)
    with sqlite3.connect(path) as raw:
        raw.execute(
            "INSERT INTO aais_resolutions (request_id, envelope, decision_fingerprint) "
            "VALUES (?, ?, NULL)",
            (requested.request.id, dump_json(envelope)),
        )
        raw.execute(
            "UPDATE aais_requests SET status = 'resolved' WHERE request_id = ?",
            (requested.request.id,),
        )
        # ... and the event a recovery sweep follows to find stranded runs.
        raw.execute(
            "INSERT INTO aais_events (sequence, envelope) VALUES (999, ?)",
            (dump_json({**envelope, "sequence": 999}),),
        )
        raw.execute("UPDATE aais_meta SET value = '999' WHERE key = 'last_sequence'")
    return envelope


def ran(
    effects: Effects, *, more_than: int = 0, also: Callable[[], bool] = lambda: False
) -> Callable[[], bool]:
    """For the hostile-input table (failed open): the forged approval was acted on (the
    action ran beyond ``more_than`` times), or ``also`` (a verification passed)."""
    return lambda: len(effects.ran) > more_than or also()


@pytest.fixture
def fresh(sqlite_backend: Backend) -> Iterator[ApprovalAuthority]:
    """Another process's authority on the same file (nothing cached)."""
    assert sqlite_backend.path is not None
    with SqliteLedger.from_path(sqlite_backend.path) as ledger:
        yield ApprovalAuthority(ledger, clock=sqlite_backend.clock)


def pause(graph: Any, thread: str) -> tuple[Any, ApprovalRequested]:
    [pending] = paused(graph.invoke({"command": "ls -la"}, config(thread)))
    return pending, requested_of(pending)


def test_a_forged_resolution_row_is_refused_by_resume_resolved(
    sqlite_backend: Backend, effects: Effects, fresh: ApprovalAuthority
) -> None:
    graph = gated_graph(sqlite_backend, effects, authority=fresh)
    _, requested = pause(graph, "t-1")
    assert sqlite_backend.path is not None
    insert_forged(sqlite_backend.path, requested)

    with refused(TAMPERING, LedgerIntegrityError, opened=ran(effects)) as raised:
        ThreadDriver(graph, fresh).resume_resolved("t-1")
    assert raised.value.table == "aais_resolutions"
    assert raised.value.row_id == requested.request.id
    with refused(TAMPERING, LedgerIntegrityError, opened=ran(effects)):
        ThreadDriver(graph, fresh).resume_stranded()
    assert effects.ran == []


def test_a_forged_resolution_sent_as_a_raw_resume_does_not_run(
    sqlite_backend: Backend, effects: Effects, fresh: ApprovalAuthority
) -> None:
    graph = gated_graph(sqlite_backend, effects, authority=fresh)
    pending, requested = pause(graph, "t-1")
    assert sqlite_backend.path is not None
    forged = insert_forged(sqlite_backend.path, requested)

    with refused(TAMPERING, LedgerIntegrityError, opened=ran(effects)):
        graph.invoke(Command(resume={pending.id: forged}), config("t-1"))
    assert effects.ran == []


def test_a_decision_on_a_request_whose_arguments_were_edited_is_refused(
    sqlite_backend: Backend, effects: Effects, fresh: ApprovalAuthority
) -> None:
    graph = gated_graph(sqlite_backend, effects, authority=fresh)
    _, requested = pause(graph, "t-1")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        raw.execute("UPDATE aais_requests SET envelope = replace(envelope, 'ls -la', 'ls -l ')")

    # A presenter in another process (nothing cached) answers what it was shown.
    with refused(TAMPERING, LedgerIntegrityError, opened=ran(effects)) as raised:
        resume_with_decisions(
            graph, config("t-1"), decide(requested), actor=HUMAN, authority=sqlite_backend.authority
        )
    assert raised.value.table == "aais_requests"
    assert effects.ran == []


def test_a_widened_grant_is_refused_instead_of_used(
    sqlite_backend: Backend, effects: Effects, fresh: ApprovalAuthority
) -> None:
    graph = gated_graph(sqlite_backend, effects, authority=fresh, choices=SESSION_CHOICES)
    _, requested = pause(graph, "t-1")
    resume_with_decisions(
        graph, config("t-1"), decide(requested, scope="persistent"), actor=HUMAN, authority=fresh
    )
    assert effects.ran == ["ls -la"]
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        raw.execute("UPDATE aais_grants SET constraints = '{}'")

    with refused(TAMPERING, LedgerIntegrityError, opened=ran(effects, more_than=1)) as raised:
        graph.invoke({"command": "rm -rf /"}, config("t-2"))
    assert raised.value.table == "aais_grants"
    assert effects.ran == ["ls -la"]


def test_with_a_key_an_approval_forged_with_a_recomputed_chain_is_refused(
    sqlite_backend: Backend, effects: Effects
) -> None:
    assert sqlite_backend.path is not None
    with SqliteLedger.from_path(sqlite_backend.path) as ledger:
        keyed = ApprovalAuthority(ledger, clock=sqlite_backend.clock, key=KEY)
        graph = gated_graph(sqlite_backend, effects, authority=keyed)
        _, requested = pause(graph, "t-1")
        # Write access without the key: the ledger's own code appends a valid chain entry.
        with SqliteLedger.from_path(sqlite_backend.path) as attacker:
            attacker.record_resolution(
                ResolutionWrite(requested.request.id, forged_approval(requested))
            )
        assert ApprovalAuthority(ledger, key=None).verify_audit().ok  # the limit without a key

        result = keyed.verify_audit()
        opened = ran(effects, also=lambda: result.ok)
        with refused(TAMPERING, LedgerIntegrityError, opened=opened):
            ThreadDriver(graph, keyed).resume_resolved("t-1")
        assert not result.ok and result.table in ("aais_audit", "aais_resolutions")
        assert "seal" in (result.reason or "")  # the forged entry's, or the row's
        assert effects.ran == []


def test_with_a_key_a_seal_copied_from_another_row_does_not_verify(
    sqlite_backend: Backend, effects: Effects
) -> None:
    assert sqlite_backend.path is not None
    with SqliteLedger.from_path(sqlite_backend.path) as ledger:
        keyed = ApprovalAuthority(ledger, clock=sqlite_backend.clock, key=KEY)
        graph = gated_graph(sqlite_backend, effects, authority=keyed)
        _, denied = pause(graph, "t-1")
        resume_with_decisions(
            graph, config("t-1"), decide(denied, "deny"), actor=HUMAN, authority=keyed
        )
        _, waiting = pause(graph, "t-2")
        [(mac,)] = (
            sqlite3.connect(sqlite_backend.path)
            .execute("SELECT mac FROM aais_resolutions")
            .fetchall()
        )
        assert mac.startswith("hmac-sha256:")
        with SqliteLedger.from_path(sqlite_backend.path) as attacker:
            attacker.record_resolution(
                ResolutionWrite(waiting.request.id, forged_approval(waiting), mac=mac)
            )
        opened = ran(effects, also=lambda: keyed.verify_audit().ok)
        with refused(TAMPERING, LedgerIntegrityError, opened=opened):
            ThreadDriver(graph, keyed).resume_resolved("t-2")
        assert keyed.verify_audit().table in ("aais_audit", "aais_resolutions")
        assert effects.ran == []


def test_with_a_key_an_honest_round_trip_verifies_and_runs(
    sqlite_backend: Backend, effects: Effects
) -> None:
    assert sqlite_backend.path is not None
    with SqliteLedger.from_path(sqlite_backend.path) as ledger:
        keyed = ApprovalAuthority(ledger, clock=sqlite_backend.clock, key=KEY)
        graph = gated_graph(sqlite_backend, effects, authority=keyed, choices=SESSION_CHOICES)
        _, requested = pause(graph, "t-1")
        resume_with_decisions(
            graph, config("t-1"), decide(requested, scope="session"), actor=HUMAN, authority=keyed
        )
        graph.invoke({"command": "ls -la"}, config("t-1"))  # the session grant covers it
        assert effects.ran == ["ls -la", "ls -la"]
        result = keyed.verify_audit()
        assert result.ok, result.reason
        # The same ledger read under another key fails at its first sealed row.
        other = ApprovalAuthority(ledger, key=b"x" * 32).verify_audit()
        assert not other.ok and other.table == "aais_audit"  # its first sealed entry
