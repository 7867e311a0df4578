"""A pending request row as a ledger stores it, JSON still text: the inbox's unit of memo."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .base import StoredRequest

__all__ = ["PendingRow"]


class PendingRow(NamedTuple):
    """A pending request row as stored, its JSON columns still text: a listing that has
    seen a row before (an equal row: the same content) need not parse or check it again.

    :meth:`parsed` is the :class:`StoredRequest` the row holds.
    """

    request_id: str
    envelope_text: str
    session_id: str
    expires_at: float | None
    thread_id: str | None
    context_text: str
    audit_index: int | None
    mac: str | None

    def parsed(self) -> StoredRequest:
        """The stored request this row holds (raises ``ValueError`` on malformed JSON)."""
        from ._records import load_json
        from .base import StoredRequest

        envelope, context = load_json(self.envelope_text), load_json(self.context_text)
        if not isinstance(envelope, dict) or not isinstance(context, dict):
            raise ValueError("ledger row holds JSON that is not an object")
        return StoredRequest(
            request_id=self.request_id,
            envelope=envelope,
            session_id=self.session_id,
            expires_at=self.expires_at,
            status="pending",
            thread_id=self.thread_id,
            context=context,
            audit_index=self.audit_index,
            mac=self.mac,
        )

    @classmethod
    def of(cls, stored: StoredRequest) -> PendingRow:
        """The row of a stored request (for backends that keep parsed values)."""
        from ._records import dump_json

        return cls(
            request_id=stored.request_id,
            envelope_text=dump_json(stored.envelope),
            session_id=stored.session_id,
            expires_at=stored.expires_at,
            thread_id=stored.thread_id,
            context_text=dump_json(stored.context),
            audit_index=stored.audit_index,
            mac=stored.mac,
        )
