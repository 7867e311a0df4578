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
  what they may see first).

A trusted caller (no principal, or an administrator) sees everything. What is
not visible is left out entirely: no id, no count, no placeholder.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from ..authority import AllowAuthenticated, ApprovalAuthority, Principal
from ..authority.resolutions import UNKNOWN_EXECUTIONS_EXTENSION
from ..protocol import ApprovalSnapshot, Request

__all__ = ["EventFilter", "visible_snapshot"]


def _trusted(authority: ApprovalAuthority, viewer: Principal | None) -> bool:
    """Whether ``viewer`` sees everything: no principal, an administrator, or an authority
    that lets every authenticated principal see everything (nothing to ask per item)."""
    return (
        viewer is None
        or viewer.administrator
        or isinstance(authority.authorizer, AllowAuthenticated)
    )


def visible_snapshot(
    authority: ApprovalAuthority, snapshot: ApprovalSnapshot, viewer: Principal | None
) -> ApprovalSnapshot:
    """``snapshot`` with only what ``viewer`` may see (unchanged for a trusted caller)."""
    if _trusted(authority, viewer):
        return snapshot
    assert viewer is not None
    pending = [
        request for request in snapshot.snapshot.pending if _may_view(authority, viewer, request)
    ]
    shown = {request.id for request in pending}
    extensions: dict[str, Any] | None = None
    if snapshot.extensions:
        extensions = {}
        for key, value in snapshot.extensions.items():
            if isinstance(value, list):
                value = [
                    item
                    for item in value
                    if not isinstance(item, Mapping)
                    or "request_id" not in item
                    or item["request_id"] in shown
                    or authority.may_view(viewer, str(item["request_id"]))
                ]
                if not value and key == UNKNOWN_EXECUTIONS_EXTENSION:
                    continue
            extensions[key] = value
    body = snapshot.snapshot.model_copy(update={"pending": pending})
    return snapshot.model_copy(update={"snapshot": body, "extensions": extensions or None})


def _may_view(authority: ApprovalAuthority, viewer: Principal, request: Request) -> bool:
    # The requester travels on the request (the authority adds it from the context).
    return authority.permits(viewer, "view", authority.request_resource(request)).allowed


class EventFilter:
    """Whether ``viewer`` may receive an envelope of the event stream (cached per request)."""

    def __init__(
        self, authority: ApprovalAuthority, viewer: Principal | None, size: int = 4096
    ) -> None:
        self._authority = authority
        self._viewer = viewer
        self._size = size
        self._seen: OrderedDict[str, bool] = OrderedDict()

    @property
    def trusted(self) -> bool:
        """Whether everything passes (no principal, or an administrator): nothing to read."""
        return _trusted(self._authority, self._viewer)

    def keep(self, envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The envelopes the viewer may receive, in order."""
        return envelopes if self.trusted else [e for e in envelopes if self(e)]

    def __call__(self, envelope: Mapping[str, Any]) -> bool:
        if self.trusted:
            return True
        request_id = _request_id_of(envelope)
        if request_id is None:
            return False  # not about one request: nothing a filtered stream passes on
        known = self._seen.get(request_id)
        if known is None:
            known = self._authority.may_view(self._viewer, request_id)
            self._seen[request_id] = known
            if len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return known


def _request_id_of(envelope: Mapping[str, Any]) -> str | None:
    for part in ("request", "decision", "resolution"):
        body = envelope.get(part)
        if isinstance(body, Mapping):
            found = body.get("id" if part == "request" else "request_id")
            return found if isinstance(found, str) else None
    return None
