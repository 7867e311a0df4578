"""Errors the authority raises; both are AAISValidationError, so callers catch one type."""

from __future__ import annotations

from ..protocol import AAISValidationError


class UnknownRequestError(AAISValidationError, LookupError):
    """A decision or cancellation names a request the authority never recorded."""

    def __init__(self, pointer: str = "/decision/request_id") -> None:
        super().__init__(pointer, "no such approval request")


class LeaseHeldError(RuntimeError):
    """Another presenter or replica is driving this thread right now; retry later."""

    def __init__(self) -> None:
        super().__init__("thread: another run holds this thread's lease; retry later")
