"""A listing for one viewer reads only the rows their rules select, and shows exactly what
the access policy lets them view: on every ledger, for any rules and requests."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.ledger import (
    EVERY_ROW,
    ActionPattern,
    InMemoryLedger,
    Ledger,
    PendingSelection,
    SqliteLedger,
)
from aais_langgraph.ledger._rows import REQUEST_COLUMNS
from aais_langgraph.ledger._sql import selected_pending_query
from aais_langgraph.ledger.selection import RowFacts
from aais_langgraph.ledger.sqlite import VIEW_SUBJECTS
from aais_langgraph.protocol import Actor
from aais_langgraph.threads import pending_approvals

KINDS = ["process.exec", "process.kill", "files.write", "net.fetch"]
NAMES = ["deploy", "deploy-prod", "rm", "fetch"]
RISKS = ["low", "medium", "high", "critical"]
PEOPLE = ["alice", "bob", "carol"]
GROUPS = ["sre", "finance", "dev"]

patterns = st.sampled_from(["process.*", "*", "files.write", "net.?etch", "[pn]*", "deploy*"])
kind_patterns = st.lists(st.one_of(st.sampled_from(KINDS), patterns), max_size=2, unique=True)
name_patterns = st.lists(st.one_of(st.sampled_from(NAMES), patterns), max_size=2, unique=True)
rules = st.lists(
    st.fixed_dictionaries(
        {
            "kinds": kind_patterns,
            "names": name_patterns,
            "risk": st.lists(st.sampled_from(RISKS), max_size=2, unique=True),
            "groups": st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2, unique=True),
        }
    ),
    max_size=4,
)
requests = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from(NAMES),
        st.sampled_from(RISKS),
        st.sampled_from([None, *PEOPLE]),
    ),
    min_size=1,
    max_size=12,
)
viewers = st.builds(
    lambda name, groups: Principal(Actor(id=name, type="human"), frozenset(groups)),
    st.sampled_from(PEOPLE),
    st.lists(st.sampled_from(GROUPS), max_size=2, unique=True),
)


def _ledgers(folder: Path) -> list[Ledger]:
    return [InMemoryLedger(), SqliteLedger(folder / "ledger.db")]


def _raise(authority: ApprovalAuthority, raised: list[tuple[str, str, str, str | None]]) -> None:
    for index, (kind, name, risk, requester) in enumerate(raised):
        authority.request(
            {"kind": kind, "name": name, "summary": "Do it", "arguments": {"index": index}},
            origin={"harness": "test", "session_id": f"s-{index % 3}"},
            risk={"level": risk, "reasons": ["test"]},
            thread_id=f"t-{index}",
            context={"requester": requester} if requester else None,
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules=rules,
    default_open=st.booleans(),
    view_own=st.booleans(),
    raised=requests,
    viewer=viewers,
)
@example(
    rules=[{"kinds": ["process.*"], "names": ["deploy*"], "risk": [], "groups": ["sre"]}],
    default_open=False,
    view_own=True,
    raised=[
        ("process.exec", "deploy-prod", "high", None),
        ("process.kill", "rm", "low", "alice"),
        ("files.write", "deploy", "low", None),
    ],
    viewer=Principal(Actor(id="alice", type="human"), frozenset({"sre"})),
)
def test_a_viewers_listing_is_exactly_what_the_policy_lets_them_view(
    rules: list[dict[str, Any]],
    default_open: bool,
    view_own: bool,
    raised: list[tuple[str, str, str, str | None]],
    viewer: Principal,
) -> None:
    policy = AccessPolicy.from_mapping(
        {
            "approvers": rules,
            "default_approvers": ["*"] if default_open else ["nobody"],
            "requesters": {"view_own": view_own},
        }
    )
    with tempfile.TemporaryDirectory() as folder:
        for ledger in _ledgers(Path(folder)):
            authority = ApprovalAuthority(ledger, authorizer=policy)
            _raise(authority, raised)
            everything = pending_approvals(authority).snapshot.pending
            expected = [
                request.id
                for request in everything
                if policy.authorize(viewer, "view", authority.request_resource(request)).allowed
            ]
            shown = pending_approvals(authority, viewer=viewer).snapshot.pending
            assert [request.id for request in shown] == expected, type(ledger).__name__
            # Listed again (answers remembered), and per session: the same cut.
            again = pending_approvals(authority, viewer=viewer).snapshot.pending
            assert [request.id for request in again] == expected
            session = pending_approvals(authority, viewer=viewer, session_id="s-1")
            in_session = {r.id for r in everything if r.origin.session_id == "s-1"}
            assert [r.id for r in session.snapshot.pending] == [
                i for i in expected if i in in_session
            ]
            if isinstance(ledger, SqliteLedger):
                ledger.close()


def _catalogue() -> list[tuple[Any, RowFacts]]:
    """A request for every kind, name, risk and requester the strategies draw from."""
    authority = ApprovalAuthority(InMemoryLedger())
    found = []
    for kind in KINDS:
        for name in NAMES:
            for risk in RISKS:
                for requester in [None, *PEOPLE]:
                    requested = authority.request(
                        {"kind": kind, "name": name, "summary": "Do it", "arguments": {}},
                        origin={"harness": "test", "session_id": "s"},
                        risk={"level": risk, "reasons": ["test"]},
                        context={"requester": requester} if requester else None,
                    )
                    facts = RowFacts.of(requested.to_json(), {})
                    found.append((authority.request_resource(requested.request), facts))
    return found


CATALOGUE = _catalogue()


@settings(max_examples=300, deadline=None)
@given(rules=rules, viewer=viewers, default_open=st.booleans(), view_own=st.booleans())
def test_the_selection_is_a_superset_of_what_a_viewer_may_view(
    rules: list[dict[str, Any]], viewer: Principal, default_open: bool, view_own: bool
) -> None:
    """Every request the policy lets the viewer see is one the selection admits (checked
    on every combination of the values the rules and requests are drawn from)."""
    policy = AccessPolicy.from_mapping(
        {
            "approvers": rules,
            "default_approvers": ["*"] if default_open else ["nobody"],
            "requesters": {"view_own": view_own},
        }
    )
    selection = policy.view_selection(viewer)
    for resource, facts in CATALOGUE:
        if policy.authorize(viewer, "view", resource).allowed:
            assert selection.admits(facts), facts


def test_a_listing_for_a_narrow_viewer_reads_through_the_kind_index(tmp_path: Path) -> None:
    """The query the SQLite ledger runs for one viewer's rows (built as it builds it) reads
    the covering index of their kinds and the one of their own requests, never every
    pending row."""
    policy = AccessPolicy.from_mapping(
        {"approvers": [{"kinds": ["process.exec"], "groups": ["sre"]}], "default_approvers": ["x"]}
    )
    ledger = SqliteLedger(tmp_path / "ledger.db")
    authority = ApprovalAuthority(ledger, authorizer=policy)
    _raise(authority, [("process.exec", "rm", "low", "bob"), ("files.write", "rm", "low", None)])
    viewer = Principal(Actor(id="alice", type="human"), frozenset({"sre"}))
    selection = authority.view_selection(viewer)
    assert selection == PendingSelection(
        actions=(ActionPattern(kinds=("process.exec",)),), requester="alice"
    )
    connection = sqlite3.connect(tmp_path / "ledger.db")
    try:
        ledger.list_pending_rows(selection=selection)  # the indexes exist once set up
        sql, params = selected_pending_query(
            REQUEST_COLUMNS, session_id=None, terms=VIEW_SUBJECTS.terms(selection)
        )
        traced = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + sql, params)]
    finally:
        connection.close()
        ledger.close()
    assert any("COVERING INDEX aais_requests_pending_kinds" in step for step in traced), traced
    assert any("COVERING INDEX aais_requests_pending_owners" in step for step in traced), traced
    assert not any(step.startswith("SCAN aais_requests") for step in traced), traced


@pytest.mark.parametrize("make", [InMemoryLedger, "sqlite"])
def test_a_trusted_or_widely_allowed_viewer_reads_every_row(make: Any, tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "l.db") if make == "sqlite" else make()
    policy = AccessPolicy.from_mapping(
        {"viewer_groups": ["audit"], "approvers": [{"kinds": ["x"], "groups": ["sre"]}]}
    )
    authority = ApprovalAuthority(ledger, authorizer=policy)
    auditor = Principal(Actor(id="dora", type="human"), frozenset({"audit"}))
    assert policy.view_selection(auditor) == EVERY_ROW
    assert authority.view_selection(auditor) is None
    # The default approvers are anyone: what no rule matches may be anything.
    assert authority.view_selection(Principal(Actor(id="eve", type="human"))) is None
    if isinstance(ledger, SqliteLedger):
        ledger.close()
