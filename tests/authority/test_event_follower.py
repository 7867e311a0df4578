"""EventFollower: pages of the authority's event stream after a sequence, in order, each once."""

from __future__ import annotations

from aais_langgraph.authority import DEFAULT_STREAM, ApprovalAuthority, EventFollower

ORIGIN = {"harness": "h", "session_id": "s"}


def _request(authority: ApprovalAuthority, n: int) -> None:
    action = {"kind": "tool.call", "name": "t", "summary": "s", "arguments": {"n": n}}
    authority.request(action, origin=ORIGIN)


def test_pages_follow_each_other_and_say_when_more_may_wait() -> None:
    authority = ApprovalAuthority()
    for n in range(3):
        _request(authority, n)
    follower = EventFollower(authority, 0, page_size=2)
    first = follower.read()
    assert [e["sequence"] for e in first.events] == [1, 2] and follower.full
    second = follower.read()
    assert [e["sequence"] for e in second.events] == [3] and not follower.full
    assert follower.read().events == [] and follower.last == 3
    _request(authority, 3)
    assert [e["sequence"] for e in follower.read().events] == [4]


def test_every_event_carries_the_authoritys_stream_id() -> None:
    authority = ApprovalAuthority(stream="team-approvals")
    _request(authority, 1)
    [event] = EventFollower(authority, 0).read().events
    assert event["stream"] == "team-approvals" != DEFAULT_STREAM
    [named] = EventFollower(authority, 0, stream="another").read().events
    assert named["stream"] == "another"


async def test_the_async_twin_reads_the_same_page() -> None:
    authority = ApprovalAuthority()
    _request(authority, 1)
    page = await EventFollower(authority, 0).aread()
    assert [e["sequence"] for e in page.events] == [1]


def test_compacted_events_are_reported_as_a_gap() -> None:
    authority = ApprovalAuthority()
    for n in range(3):
        _request(authority, n)
    authority.ledger.compact_events(3)
    page = EventFollower(authority, 0).read()
    assert page.gap and [e["sequence"] for e in page.events] == [3]
