"""What one principal may see: listings and event streams cut to the requests they may view.

SPEC §4.4: a snapshot holds the unresolved requests *visible to the authenticated
presenter*. Every listing and stream a presenter reads passes through here with
the authenticated :class:`~aais_langgraph.authority.Principal`:

- :func:`visible_snapshot` keeps the pending requests, and the entries of the
  snapshot's extensions (unknown outcomes, waiting resumes, integrity errors),
  that the principal may ``view``;
- :class:`EventFilter` says, per envelope of the event stream, whether the
  principal may receive it (a request's events follow the request's
  visibility; anything not about one request, such as a snapshot, is cut to
  what they may see first), and which requests escalated to them while their
  stream was open (:meth:`EventFilter.aescalated`).

An escalation records no event of the stream: it is a ``follow_up`` entry of the
audit chain (:mod:`aais_langgraph.ledger.follow_ups`). A stream whose authorizer
escalates follows that chain from where it began, and hands a viewer the request's
stored ``approval.requested`` envelope once an escalation lets them view it, and only
when they could not view it without the escalation: whoever saw it already gets no
second copy. It is the request they would have found in a snapshot (SPEC §4.4: what
is visible to the presenter); the next snapshot of a reconnect holds it too. The
transports send it on their own stream
(:meth:`~aais_langgraph.authority.ReplyStream.shown`), not the authority's.

A trusted caller (no principal, or an administrator) sees everything. What is
not visible is left out entirely: no id, no count, no placeholder.
"""

from __future__ import annotations

import asyncio
import operator
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from weakref import WeakKeyDictionary

from ..authority import ApprovalAuthority, Principal
from ..authority.authorization import is_deterministic, is_escalations
from ..authority.resolutions import UNKNOWN_EXECUTIONS_EXTENSION
from ..protocol import ApprovalSnapshot, Request

__all__ = ["EventFilter", "visible_snapshot"]


def visible_snapshot(
    authority: ApprovalAuthority, snapshot: ApprovalSnapshot, viewer: Principal | None
) -> ApprovalSnapshot:
    """``snapshot`` with only what ``viewer`` may see (unchanged for a trusted caller).

    With a deterministic authorizer (``deterministic = True``: see
    :class:`~aais_langgraph.authority.Authorizer`) each request's answer is remembered per
    viewer, for the requests of their last listing."""
    if authority.access.sees_everything(viewer):
        return snapshot
    assert viewer is not None
    pending = _visible_requests(authority, viewer, snapshot.snapshot.pending)
    if pending is snapshot.snapshot.pending and not snapshot.extensions:
        return snapshot  # all of it is visible: nothing to cut
    extensions: dict[str, Any] | None = None
    if snapshot.extensions:
        shown = {request.id for request in pending}
        extensions = {}
        for key, value in snapshot.extensions.items():
            if isinstance(value, list):
                value = [
                    item
                    for item in value
                    if not isinstance(item, Mapping)
                    or "request_id" not in item
                    or item["request_id"] in shown
                    or authority.access.may_view(viewer, str(item["request_id"]))
                ]
                if not value and key == UNKNOWN_EXECUTIONS_EXTENSION:
                    continue
            extensions[key] = value
    body = snapshot.snapshot.model_copy(update={"pending": pending})
    return snapshot.model_copy(update={"snapshot": body, "extensions": extensions or None})


def _may_view(authority: ApprovalAuthority, viewer: Principal, request: Request) -> bool:
    # The requester travels on the request (the authority adds it from the context).
    access = authority.access
    return access.permits(viewer, "view", access.request_resource(request)).allowed


_ViewerKey = tuple[object, str, frozenset[str]]
"""An authorizer and a viewer's id and groups: what its answers depend on."""

_VIEWERS = 256
"""Viewers whose answers are remembered per authority (the least recent forgotten)."""


@dataclass
class _Answers:
    """One viewer's answers for the requests of their last listing (in order)."""

    requests: list[Request]
    """The validated requests listed (the listing's own models: a listing of the same
    rows hands out the same objects, so comparing them is a pass of identity checks)."""
    visible: dict[str, bool]
    """Request id -> whether they may view it."""
    everything: bool
    """Whether they may view every one of them."""


_LOCK = threading.Lock()
_ANSWERS: WeakKeyDictionary[ApprovalAuthority, OrderedDict[_ViewerKey, _Answers]] = (
    WeakKeyDictionary()
)


def _visible_requests(
    authority: ApprovalAuthority, viewer: Principal, pending: list[Request]
) -> list[Request]:
    if not is_deterministic(authority.authorizer):
        return [request for request in pending if _may_view(authority, viewer, request)]
    key: _ViewerKey = (authority.authorizer, viewer.id, viewer.groups)
    with _LOCK:
        viewers = _ANSWERS.setdefault(authority, OrderedDict())
        last = viewers.get(key)
    # A request's id names one vouched envelope, so its answer cannot change, except a
    # "no" for a request the policy escalates: its escalation may have run since.
    authorizer = authority.authorizer
    escalating = [
        request
        for request in pending
        if is_escalations(authorizer) and authorizer.escalates(request)
    ]
    answers = last
    if last is None or escalating or not _same_objects(last.requests, pending):
        known = {} if last is None else last.visible
        again = {request.id for request in escalating if known.get(request.id) is False}
        visible: dict[str, bool] = {}
        for request in pending:
            found = None if request.id in again else known.get(request.id)
            visible[request.id] = _may_view(authority, viewer, request) if found is None else found
        answers = _Answers(list(pending), visible, all(visible.values()))
    assert answers is not None
    with _LOCK:
        viewers[key] = answers  # only this listing's requests: bounded by what is pending
        viewers.move_to_end(key)
        while len(viewers) > _VIEWERS:
            viewers.popitem(last=False)
    if answers.everything:
        return pending
    return [request for request in pending if answers.visible[request.id]]


def _same_objects(before: list[Request], now: list[Request]) -> bool:
    """Whether ``now`` holds the very objects ``before`` held, in the same order."""
    return len(before) == len(now) and all(map(operator.is_, before, now))


_ESCALATIONS_PAGE = 500
"""Audit entries read per look for escalations."""


class EventFilter:
    """Whether ``viewer`` may receive an envelope of the event stream (cached per request),
    and the requests that escalated to them since the stream began."""

    def __init__(
        self, authority: ApprovalAuthority, viewer: Principal | None, size: int = 4096
    ) -> None:
        self._authority = authority
        self._viewer = viewer
        self._size = size
        self._seen: OrderedDict[str, bool] = OrderedDict()
        self._audit_index: int | None = None
        """The last audit entry looked at for escalations (None: not begun)."""

    async def aescalated(self) -> list[dict[str, Any]]:
        """The ``approval.requested`` envelopes of the requests whose escalation ran since
        the last call and lets the viewer view them now, where nothing else did (see the
        module docs); the first call only marks where the stream begins (call it before
        its snapshot). Nothing for a trusted viewer or an authorizer that never escalates."""
        authorizer = self._authority.authorizer
        if (
            self.trusted
            or not is_escalations(authorizer)
            or getattr(authorizer, "escalates_anything", True) is False
        ):
            return []
        return await asyncio.to_thread(self._escalated)

    def _escalated(self) -> list[dict[str, Any]]:
        ledger = self._authority.ledger
        if self._audit_index is None:
            tip = ledger.audit_tip()
            self._audit_index = -1 if tip is None else tip[0]
            return []
        found: list[dict[str, Any]] = []
        while True:
            entries = ledger.audit_entries(after_index=self._audit_index, limit=_ESCALATIONS_PAGE)
            for entry in entries:
                self._audit_index = entry.index
                request_id = entry.payload.get("request_id")
                if (
                    entry.kind == "follow_up"
                    and entry.payload.get("follow_up") == "escalation"
                    and isinstance(request_id, str)
                ):
                    envelope = self._newly_visible(request_id)
                    if envelope is not None:
                        found.append(envelope)
            if len(entries) < _ESCALATIONS_PAGE:
                return found

    def _newly_visible(self, request_id: str) -> dict[str, Any] | None:
        """The request's envelope when its escalation (vouched, as the access object reads
        it) is what lets the viewer view it; the answer is remembered for its events."""
        access, ledger = self._authority.access, self._authority.ledger
        stored = ledger.get_request(request_id)
        if stored is None or ledger.get_resolution(request_id) is not None:
            return None  # a resolved request is no longer shown as pending
        resource = access.stored_resource(request_id, stored=stored)
        if resource is None or not resource.escalated:
            return None
        if not access.permits(self._viewer, "view", resource).allowed:
            self._remember(request_id, False)
            return None
        self._remember(request_id, True)
        before = replace(resource, escalated=False, escalated_to=frozenset())
        if access.permits(self._viewer, "view", before).allowed:
            return None  # theirs already: in their snapshot or their stream's events
        return dict(stored.envelope)

    @property
    def trusted(self) -> bool:
        """Whether everything passes (no principal, or an administrator): nothing to read."""
        return self._authority.access.sees_everything(self._viewer)

    def keep(self, envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The envelopes the viewer may receive, in order."""
        return envelopes if self.trusted else [e for e in envelopes if self(e)]

    async def akeep(self, envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """:meth:`keep`, asking about the requests not seen yet off the event loop, at once."""
        if self.trusted:
            return envelopes
        ids = [_request_id_of(envelope) for envelope in envelopes]
        answers = {rid: self._seen[rid] for rid in ids if rid is not None and rid in self._seen}
        asked = {rid for rid in ids if rid is not None and rid not in answers}
        if asked:
            shown = await self._authority.access.avisible(self._viewer, asked)
            for rid in asked:
                answers[rid] = rid in shown
                self._remember(rid, answers[rid])
        return [
            e for e, rid in zip(envelopes, ids, strict=True) if rid is not None and answers[rid]
        ]

    def _remember(self, request_id: str, visible: bool) -> None:
        self._seen[request_id] = visible
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)

    def __call__(self, envelope: Mapping[str, Any]) -> bool:
        if self.trusted:
            return True
        request_id = _request_id_of(envelope)
        if request_id is None:
            return False  # not about one request: nothing a filtered stream passes on
        known = self._seen.get(request_id)
        if known is None:
            known = self._authority.access.may_view(self._viewer, request_id)
            self._remember(request_id, known)
        return known


def _request_id_of(envelope: Mapping[str, Any]) -> str | None:
    for part in ("request", "decision", "resolution"):
        body = envelope.get(part)
        if isinstance(body, Mapping):
            found = body.get("id" if part == "request" else "request_id")
            return found if isinstance(found, str) else None
    return None
