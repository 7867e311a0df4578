"""Every AAIS outcome has a decided AAE outcome, and only ``approved`` grants.

AAE's lifecycle treats any string other than ``denied``/``timed_out`` as a grant,
so the mapping is total: the table below must list every outcome the AAIS
protocol model defines (a new outcome fails here until someone decides it).
"""

from __future__ import annotations

import typing

from aae.approvals import ApprovalOutcome
from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.aae import AAE_OUTCOMES, aae_outcome
from aais_langgraph.protocol import Outcome

EXPECTED = {
    "approved": "granted",
    "denied": "denied",
    "expired": "timed_out",
    "cancelled": "denied",
    "stale": "denied",
    "conflict": "denied",
    "invalid": "denied",
}


def test_the_table_covers_every_aais_outcome() -> None:
    assert set(EXPECTED) == set(typing.get_args(Outcome))


def test_every_aais_outcome_maps_as_decided() -> None:
    for outcome in typing.get_args(Outcome):
        assert aae_outcome(outcome) == EXPECTED[outcome], outcome


def test_mapped_values_are_aae_constants() -> None:
    constants = {ApprovalOutcome.GRANTED, ApprovalOutcome.DENIED, ApprovalOutcome.TIMED_OUT}
    assert set(EXPECTED.values()) == constants
    assert set(AAE_OUTCOMES.values()) <= constants


@given(st.one_of(st.text(), st.none(), st.integers(), st.binary()))
def test_anything_else_is_a_denial(outcome: object) -> None:
    expected = {"approved": "granted", "expired": "timed_out"}.get(outcome, "denied")  # type: ignore[call-overload]
    assert aae_outcome(outcome) == expected


def test_lookalikes_of_approved_are_denials() -> None:
    class Sneaky(str):
        pass

    for outcome in ("Approved", "approved ", "granted", "allow", Sneaky("approved"), b"approved"):
        assert aae_outcome(outcome) == "denied"


class _Says:
    """An AAE delivery that answers with a fixed outcome string."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome

    async def request_and_wait(self, **_: object) -> tuple[str, str | None]:
        return self.outcome, "someone"


async def test_aae_itself_treats_an_unknown_outcome_as_a_grant(tmp_path: object) -> None:
    """Why the mapping must be total: AAE 0.9 grants on any string it does not know."""
    from pathlib import Path

    from aae import Decision
    from aae.audit import InMemoryAuditSink
    from aae.lifecycle import LifecycleClient
    from aae.tools import InMemoryToolRegistry

    from .support import ISSUER, AlwaysAsk, proposal, signer, write_note_tool

    registry = InMemoryToolRegistry()
    registry.register(write_note_tool())
    client = LifecycleClient(
        registry=registry,
        policy=AlwaysAsk(),
        audit=InMemoryAuditSink(),
        approvals=_Says("cancelled"),
        tokens=signer(),
        issuer=ISSUER,
    )
    note = Path(str(tmp_path)) / "note.txt"
    result = await client.execute(proposal(note))
    assert result.decision is Decision.ALLOW and note.read_text() == "hello\n"
