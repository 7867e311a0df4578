"""Stateful property test: random interleavings of ledger calls agree with a simple model."""

from __future__ import annotations

import copy
import shutil
import tempfile
from contextlib import ExitStack
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from aais_langgraph.ledger import InMemoryLedger, Ledger, SqliteLedger, verify_audit
from support.pg_cluster import PostgresCluster, fresh_schema_url

from .envelopes import approval, grant_for, request_envelope

REQUEST_NUMBERS = st.integers(0, 4)
THREADS = st.sampled_from(["thr_1", "thr_2"])
HOLDERS = st.sampled_from(["worker_a", "worker_b"])


@cache
def _envelope(request_id: str, session_id: str) -> dict[str, Any]:
    return request_envelope(request_id, session_id=session_id)


class LedgerModel(RuleBasedStateMachine):
    """Drives one backend and a plain-Python model of the contract side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.ledger = self.open_ledger()
        self.sequence = 0
        self.event_sequences: list[int] = []
        self.requests: dict[str, dict[str, Any]] = {}
        self.pending: list[str] = []
        self.winners: dict[str, str] = {}
        self.grants: dict[str, bool] = {}
        self.audit_count = 0
        self.leases: dict[str, tuple[str, float]] = {}
        self.now = 1000.0

    def open_ledger(self) -> Ledger:
        return InMemoryLedger()

    # -- requests and resolutions --------------------------------------------------

    @rule(number=REQUEST_NUMBERS, session=st.sampled_from(["s1", "s2"]), thread=THREADS)
    def add_request(self, number: int, session: str, thread: str) -> None:
        request_id = f"apr_{number}"
        envelope = copy.deepcopy(_envelope(request_id, session))
        stored, created = self.ledger.add_request(envelope, thread_id=thread)
        if request_id in self.requests:
            assert created is False
            assert stored.envelope == self.requests[request_id]
            return
        self.sequence += 1
        self.event_sequences.append(self.sequence)
        self.audit_count += 1
        assert created is True
        assert stored.envelope["sequence"] == self.sequence
        self.requests[request_id] = stored.envelope
        self.pending.append(request_id)

    @rule(
        number=REQUEST_NUMBERS,
        variant=st.integers(0, 3),
        decided=st.booleans(),
        grant_scope=st.sampled_from([None, "session", "persistent"]),
    )
    def record_resolution(
        self, number: int, variant: int, decided: bool, grant_scope: str | None
    ) -> None:
        request_id = f"apr_{number}"
        requested = self.requests.get(request_id) or _envelope(request_id, "s1")
        tag = f"{number}_{variant}"
        grant = (
            None
            if grant_scope is None
            else grant_for(requested, grant_id=f"grt_{tag}", scope=grant_scope)
        )
        write = approval(
            requested,
            resolution_id=f"res_{tag}",
            decision_id=f"dec_{tag}" if decided else None,
            grant=grant,
        )
        if request_id not in self.requests:
            with pytest.raises(KeyError):
                self.ledger.record_resolution(write)
            return
        stored, created = self.ledger.record_resolution(write)
        if request_id in self.winners:
            assert created is False
            assert stored.envelope["resolution"]["id"] == self.winners[request_id]
            return
        assert created is True
        self.winners[request_id] = f"res_{tag}"
        self.pending.remove(request_id)
        for _ in range(2 if decided else 1):
            self.sequence += 1
            self.event_sequences.append(self.sequence)
        assert stored.envelope["sequence"] == self.sequence
        self.audit_count += (2 if decided else 1) + (grant is not None)
        if grant is not None:
            self.grants[grant.grant_id] = False

    @precondition(lambda self: bool(self.grants))
    @rule(data=st.data())
    def revoke_grant(self, data: st.DataObject) -> None:
        grant_id = data.draw(st.sampled_from(sorted(self.grants)))
        revoked = self.ledger.revoke_grant(grant_id, now=self.now)
        assert revoked is not self.grants[grant_id]
        if revoked:
            self.grants[grant_id] = True
            self.audit_count += 1

    @rule(before=st.integers(0, 25))
    def compact_events(self, before: int) -> None:
        dropped = [s for s in self.event_sequences if s < before]
        assert self.ledger.compact_events(before) == len(dropped)
        self.event_sequences = [s for s in self.event_sequences if s >= before]
        self.audit_count += 1 if dropped else 0  # a compaction that dropped any is audited

    @rule()
    def append_audit(self) -> None:
        entry = self.ledger.append_audit("conflict", {"note": "model"})
        assert entry.index == self.audit_count
        self.audit_count += 1

    # -- leases --------------------------------------------------------------------

    @rule(seconds=st.sampled_from([0.0, 5.0]))
    def tick(self, seconds: float) -> None:
        self.now += seconds

    @rule(thread=THREADS, holder=HOLDERS, ttl=st.sampled_from([5.0, 10.0]))
    def acquire_lease(self, thread: str, holder: str, ttl: float) -> None:
        current = self.leases.get(thread)
        free = current is None or current[0] == holder or current[1] <= self.now
        lease = self.ledger.acquire_lease(thread, holder, ttl=ttl, now=self.now)
        assert (lease is not None) == free
        if lease is not None:
            assert (lease.holder, lease.expires_at) == (holder, self.now + ttl)
            self.leases[thread] = (holder, self.now + ttl)

    @rule(thread=THREADS, holder=HOLDERS, ttl=st.sampled_from([5.0, 10.0]))
    def renew_lease(self, thread: str, holder: str, ttl: float) -> None:
        current = self.leases.get(thread)
        ours = current is not None and current[0] == holder and current[1] > self.now
        lease = self.ledger.renew_lease(thread, holder, ttl=ttl, now=self.now)
        assert (lease is not None) == ours
        if lease is not None:
            self.leases[thread] = (holder, self.now + ttl)

    @rule(thread=THREADS, holder=HOLDERS)
    def release_lease(self, thread: str, holder: str) -> None:
        current = self.leases.get(thread)
        ours = current is not None and current[0] == holder
        assert self.ledger.release_lease(thread, holder) is ours
        if ours:
            del self.leases[thread]

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def sequences_and_events_match(self) -> None:
        assert self.ledger.last_sequence() == self.sequence
        events = self.ledger.events_after(0, limit=1000)
        assert [e["sequence"] for e in events] == self.event_sequences
        expected_first = self.event_sequences[0] if self.event_sequences else None
        assert self.ledger.first_event_sequence() == expected_first

    @invariant()
    def pending_view_matches(self) -> None:
        assert [r.request_id for r in self.ledger.list_pending()] == self.pending

    @invariant()
    def live_grants_match(self) -> None:
        live = sorted(g.grant_id for g in self.ledger.list_grants())
        assert live == sorted(g for g, revoked in self.grants.items() if not revoked)

    @invariant()
    def audit_chain_verifies(self) -> None:
        result = verify_audit(self.ledger.audit_entries(), self.ledger.audit_tip())
        assert result.ok, result.reason
        assert result.checked == self.audit_count


class SqliteLedgerModel(LedgerModel):
    """The same model against a fresh SQLite file per example."""

    def open_ledger(self) -> Ledger:
        self.directory = Path(tempfile.mkdtemp(prefix="aais-ledger-"))
        self.sqlite = SqliteLedger(self.directory / "ledger.db")
        self.sqlite.setup()
        return self.sqlite

    def teardown(self) -> None:
        self.sqlite.close()
        shutil.rmtree(self.directory, ignore_errors=True)


class PostgresLedgerModel(LedgerModel):
    """The same model against a PostgresLedger in a new schema per example."""

    cluster: PostgresCluster | None = None

    def open_ledger(self) -> Ledger:
        from aais_langgraph.ledger.postgres import PostgresLedger

        assert self.cluster is not None, "the postgres_cluster fixture did not run"
        self.connections = ExitStack()
        url = fresh_schema_url(self.cluster)
        ledger = self.connections.enter_context(PostgresLedger.from_conn_string(url))
        ledger.setup()
        return ledger

    def teardown(self) -> None:
        self.connections.close()


@pytest.fixture
def _postgres_for_the_model(postgres_cluster: PostgresCluster) -> None:
    PostgresLedgerModel.cluster = postgres_cluster


MODEL_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestInMemoryLedgerModel = LedgerModel.TestCase
TestInMemoryLedgerModel.settings = MODEL_SETTINGS
TestSqliteLedgerModel = SqliteLedgerModel.TestCase
TestSqliteLedgerModel.settings = MODEL_SETTINGS
TestPostgresLedgerModel = pytest.mark.usefixtures("_postgres_for_the_model")(
    PostgresLedgerModel.TestCase
)
TestPostgresLedgerModel.settings = MODEL_SETTINGS
