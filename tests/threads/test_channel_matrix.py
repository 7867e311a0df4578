"""The channel matrix: the same answers through every channel, the same outcome and ledger.

One parametrised test, channel x answer (the channels are in ``matrix_channels.py``).
Every cell pauses a fresh thread of the served demo graph, sends one answer through
one channel and then checks, through the public API only: whether the action ran
(the effect log), what the ledger holds for the request (``get_resolution``,
``ledger.get_work``), whether ``pending_approvals`` still lists it, whether
the thread is still paused, and that the recorded decision names the channel's
authenticated actor, never the body's.

The answers:

- ``valid``: approve/once, as offered;
- ``forged_digest``: ``action_digest`` replaced by ``sha256:0…0``;
- ``unoffered``: approve/persistent, when only approve/once and deny/once are offered;
- ``expired``: a valid approval of a request raised an hour ago (its 15-minute expiry
  has passed by every channel's clock: the CLI and the presenter run their own);
- ``forged_actor``: a valid approval whose body names mallory;
- ``duplicate_keys``: a valid approval as JSON text with ``"type"`` given twice;
- ``partial``: a thread paused on two tool-call approvals, only the first answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest

from aais_langgraph import pending_approvals
from aais_langgraph.ledger import RESUME
from agui.served_site import Site, served_site
from hostile.report import hostile_input
from presenter.support import presenter

from .matrix_channels import AUTHENTICATED, CHANNELS, Cell, Matrix, slack_app

pytestmark = pytest.mark.filterwarnings("ignore:`get_config_jsonschema`")

ANSWERS = (
    "valid",
    "forged_digest",
    "unoffered",
    "expired",
    "forged_actor",
    "duplicate_keys",
    "partial",
)

# Pairs that cannot be sent, so they are not in the matrix (never skipped at run time).
NOT_APPLICABLE = {
    # Command(resume=...) carries Python objects: there is no JSON text to repeat a key in.
    ("raw", "duplicate_keys"),
    # Command(resume=...) from in-process code has no authenticated channel: the caller is
    # trusted code and its decision's actor is recorded as given (gate/channel.py); a
    # served graph accepts no such answer at all (tests/gate/test_answer_source.py).
    ("raw", "forged_actor"),
    # The CLI builds the decision itself from the stored request (digest included) ...
    ("cli", "forged_digest"),
    # ... as the operating-system user: no body, so no actor to forge ...
    ("cli", "forged_actor"),
    # ... and it reads no JSON at all.
    ("cli", "duplicate_keys"),
}
CELLS = [
    pytest.param(channel, answer, id=f"{channel}-{answer}")
    for channel in CHANNELS
    for answer in ANSWERS
    if (channel, answer) not in NOT_APPLICABLE
]
HOSTILE = "channel matrix"  # the hostile-input table's row (tests/hostile/report.py)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    folder = tmp_path_factory.mktemp("matrix")
    with served_site(folder, slack=slack_app()) as site, presenter(site.db) as stdio:
        headers = {"Authorization": "Bearer alice-token"}
        with httpx.Client(base_url=site.url, headers=headers, timeout=30) as client:
            yield Matrix(site, client, stdio)


def pause_for(matrix: Matrix, answer: str) -> Cell:
    if answer == "partial":
        return matrix.pause("email ann@example.com,bob@example.com")
    raised_ago = timedelta(hours=1) if answer == "expired" else None
    return matrix.pause(f"delete /srv/{answer}.txt", raised_ago=raised_ago)


# -- what the public API says after the channel returned ----------------------------------


def decided_actors(site: Site, request_id: str) -> list[str]:
    """The actors of the ``approval.decided`` events recorded for the request."""
    events = site.authority.events_after(0, limit=100_000).events
    return [
        str(event["decision"]["actor"]["id"])
        for event in events
        if event["type"] == "approval.decided" and event["decision"]["request_id"] == request_id
    ]


def observe(site: Site, cell: Cell) -> dict[str, Any]:
    pending = {
        request.id for request in pending_approvals(site.authority, site.graph).snapshot.pending
    }
    first, *others = cell.request_ids
    recorded = site.authority.get_resolution(first)
    work = site.authority.ledger.get_work(RESUME, first)
    ran = site.effects.list(cell.thread_id)
    seen: dict[str, Any] = {
        "recorded": None if recorded is None else recorded.resolution.outcome,
        "actors": decided_actors(site, first),
        "ran": len(ran),
        "ran_only_the_answered_action": set(ran) <= {cell.effect_of(0)},
        "pending": first in pending,
        "paused": bool(site.graph.get_state(cell.config).interrupts),
        "resume_work": None if work is None else work.state,
    }
    for index, other in enumerate(others, start=1):
        unanswered = site.authority.get_resolution(other)
        seen[f"request {index} recorded"] = (
            None if unanswered is None else unanswered.resolution.outcome
        )
        seen[f"request {index} pending"] = other in pending
    return seen


# -- what every channel must show ----------------------------------------------------------

APPROVED = {
    "recorded": "approved",
    "ran": 1,
    "ran_only_the_answered_action": True,
    "pending": False,
    "paused": False,
}
UNTOUCHED = {
    "recorded": None,
    "actors": [],
    "ran": 0,
    "pending": True,
    "paused": True,
    "resume_work": None,
}


def expected(channel: str, answer: str) -> dict[str, Any]:
    """The outcome of ``answer``: the same for every channel (the exceptions say why)."""
    actor = AUTHENTICATED[channel]
    if answer == "valid":
        # The body names the channel's actor (alice for the raw path, which has none).
        return {**APPROVED, "actors": [actor or "alice"]}
    if answer == "forged_actor":
        return {**APPROVED, "actors": [actor]}
    if answer == "expired":
        # SPEC §11: a decision at or after expiry resolves the request ``expired``,
        # recorded under the channel's actor; nothing runs.
        return {"ran": 0, "pending": False, "recorded": "expired", "actors": [actor or "alice"]}
    if answer == "partial":
        other = {"request 1 recorded": None, "request 1 pending": True, "paused": True}
        if channel == "agui":  # AG-UI resumes every open interrupt at once, or none
            return {**UNTOUCHED, **other}
        return {**APPROVED, **other, "actors": [actor or "alice"]}  # the other stays pending
    return UNTOUCHED  # forged_digest, unoffered, duplicate_keys


def opened(site: Site, cell: Cell, answer: str) -> Any:
    """For the hostile-input table: did the hostile answer get through?"""

    def observe_opened() -> bool:
        if answer == "forged_actor":
            return "mallory" in decided_actors(site, cell.request_ids[0])
        recorded = site.authority.get_resolution(cell.request_ids[0])
        return bool(site.effects.list(cell.thread_id)) or bool(recorded and recorded.approved)

    return observe_opened


@pytest.mark.parametrize(("channel", "answer"), CELLS)
def test_every_channel_gives_an_answer_the_same_outcome(
    matrix: Matrix, channel: str, answer: str
) -> None:
    cell = pause_for(matrix, answer)
    send = CHANNELS[channel]
    if answer in ("valid", "partial"):
        reply = send(matrix, cell, answer)
    else:
        with hostile_input(HOSTILE, opened(matrix.site, cell, answer)):
            reply = send(matrix, cell, answer)
    seen = observe(matrix.site, cell)
    said = f"{channel} replied {reply!r}; observed {seen}"

    want = expected(channel, answer)
    assert {key: seen[key] for key in want} == want, said
    # Nothing is left to resume: the thread was resumed, or nothing was recorded (a run
    # that records its own answer, the raw path, writes no resume work at all).
    assert seen["resume_work"] in (None, "done"), said
    if answer == "partial" and channel == "agui":
        assert reply == "RUN_ERROR aais.partial_resume", said
