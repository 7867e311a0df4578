"""Recording one ``approval.decided`` for a presenter binding: the rules every binding shares.

The HTTP decisions endpoint, the WebSocket binding and any other binding that answers
one request call :func:`arecord_decision`: the envelope is read as strict I-JSON by the
project's parser (duplicate keys, NaN, big integers, lone surrogates and unknown
fields, such as edited arguments, refused: SPEC §4.2), the authenticated actor
replaces the body's (SPEC §10), and the one answer planner
(:meth:`aais_langgraph.threads.AnswerPlanner.arecord_decision`) authorizes and
records the outcome, ``conflict``, ``stale`` and ``invalid`` included. What cannot
be recorded raises :class:`DecisionRefused`, which names the field and never
echoes a value.
"""

from __future__ import annotations

from dataclasses import dataclass

from aais_langgraph.authority import (
    ApprovalAuthority,
    ForbiddenError,
    Principal,
    UnknownRequestError,
)
from aais_langgraph.protocol import (
    DEFAULT_MAX_BYTES,
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    Refusal,
    parse_envelope,
)
from aais_langgraph.threads import AnswerPlanner

__all__ = ["DecisionRefused", "arecord_decision"]


@dataclass(frozen=True)
class DecisionRefused(Refusal):
    """Nothing was recorded: ``status`` for HTTP, ``code``, the field's ``pointer``, a message."""

    status: int
    code: str
    pointer: str
    message: str

    def __str__(self) -> str:
        return self.message


async def arecord_decision(
    authority: ApprovalAuthority,
    body: bytes | str,
    actor: Actor | Principal,
    *,
    request_id: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[ApprovalDecided, ApprovalResolved]:
    """Record the decision in ``body`` as ``actor``: the decision read and its resolution.

    Every outcome is a resolution (``conflict``, ``stale``, ``invalid`` included).

    ``request_id`` (the HTTP path's) must be the decision's own. Raises
    :class:`DecisionRefused` for a malformed envelope (422), an unknown request
    (404) and a principal the authorizer refuses (403 ``aais.forbidden``: nothing is
    recorded); the authority's ``LedgerIntegrityError`` passes through.

    Args:
        authority: the authority that records it (through the one answer planner).
        body: the ``approval.decided`` envelope as JSON text.
        actor: the authenticated actor; replaces the body's (SPEC §10).
        request_id: the request the HTTP path names (None: the body's).
        max_bytes: the longest body read.
    """
    try:
        decided = parse_envelope(body, expected=ApprovalDecided, max_bytes=max_bytes)
    except AAISValidationError as error:
        raise DecisionRefused(422, "aais.invalid_envelope", error.pointer, str(error)) from None
    if request_id is not None and decided.decision.request_id != request_id:
        raise DecisionRefused(
            422,
            "aais.invalid_envelope",
            "/decision/request_id",
            "/decision/request_id: does not match the request in the path",
        )
    try:
        return decided, await AnswerPlanner(authority).arecord_decision(decided, actor)
    except UnknownRequestError as error:
        raise DecisionRefused(
            404, "aais.unknown_request", error.pointer, "no such approval request"
        ) from None
    except ForbiddenError as error:
        raise DecisionRefused(403, error.code, "/decision", error.reason) from None
    except AAISValidationError as error:  # e.g. a reviewer note that is too long
        raise DecisionRefused(422, "aais.invalid_envelope", error.pointer, str(error)) from None
