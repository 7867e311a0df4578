"""Errors the authority raises: an unknown request (a refusal) and a held thread lease."""

from __future__ import annotations

from ..protocol import AAISValidationError
from ..protocol.refusals import UNKNOWN_REQUEST, Refusal


class UnknownRequestError(AAISValidationError, LookupError, Refusal):
    """A decision or cancellation names a request the authority never recorded."""

    code = UNKNOWN_REQUEST

    def __init__(self, pointer: str = "/decision/request_id") -> None:
        super().__init__(pointer, "no such approval request")


class LeaseHeldError(RuntimeError):
    """Another presenter or replica is driving this thread right now; retry later."""

    def __init__(self) -> None:
        super().__init__("thread: another run holds this thread's lease; retry later")
