"""The refusal vocabulary: every refusal code the package sends, and how each transport says it.

The codes are ``aais.*``, and four families only one HTTP surface sends: ``agui.*``
(the AG-UI endpoint's checks of a ``RunAgentInput`` body), ``inbox.*`` (the inbox
page's routes) and ``http.error`` (any other HTTP error, such as an unknown path).

A refusal changed nothing (or, for ``aais.expired``, recorded only the expiry) and
names the field or rule, never a value. Each code has one entry in
:data:`REFUSALS`: its meaning, its HTTP status and, where a WebSocket connection
closes for it, the close code. The transports read the entry through one
function each: :func:`http_refusal` (status and JSON body), :func:`agui_refusal` (the
AG-UI ``RUN_ERROR`` fields), :func:`websocket_refusal` / :func:`websocket_close_code`
(the error frame, the close code) and :func:`ndjson_refusal` (the stdio presenter's
error line). The exceptions that refuse derive from :class:`Refusal`, beside the
built-in base each already had (``PermissionError``, ``ValueError``, ...).
``docs/refusals.md`` is rendered from this table (``scripts/refusals_page.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

__all__ = [
    "AGUI_ID_TOO_LONG",
    "AGUI_INVALID_INPUT",
    "BAD_AFTER",
    "BAD_AUTHENTICATOR",
    "BAD_HOST",
    "BAD_LAST_EVENT_ID",
    "BINARY_FRAME",
    "BODY_TOO_LARGE",
    "CONFLICT",
    "CSRF",
    "DIGEST_MISMATCH",
    "EXPIRED",
    "FORBIDDEN",
    "FOREIGN_ORIGIN",
    "FORWARDED_PROPS_REFUSED",
    "HTTP_ERROR",
    "ID_TOO_LONG",
    "INBOX_NOT_FOUND",
    "INBOX_UNKNOWN_DELIVERY",
    "INBOX_UNKNOWN_GRANT",
    "INTERNAL",
    "INVALID",
    "INVALID_CANCEL",
    "INVALID_ENVELOPE",
    "INVALID_RESUME",
    "INVALID_TOOLS",
    "LEDGER_INTEGRITY",
    "LIMIT_EXCEEDED",
    "LINE_TOO_LARGE",
    "PARTIAL_RESUME",
    "REFUSALS",
    "SIGN_IN_FAILED",
    "SIGN_IN_PROVIDER",
    "SIGN_IN_REFUSED",
    "SIGN_IN_STATE",
    "SLACK_PAYLOAD",
    "SLACK_SIGNATURE",
    "SLACK_USER",
    "STALE",
    "THREAD_BUSY",
    "UNAUTHENTICATED",
    "UNKNOWN_INTERRUPT",
    "UNKNOWN_REQUEST",
    "UNSUPPORTED_MEDIA_TYPE",
    "Refusal",
    "RefusalEntry",
    "Transport",
    "agui_refusal",
    "http_refusal",
    "ndjson_refusal",
    "outcome_refusal",
    "websocket_close_code",
    "websocket_refusal",
]

Transport = Literal["http", "agui", "websocket", "ndjson", "langgraph"]
"""Where a refusal is sent: an HTTP error body (the SSE stream's sign-out event
included), an AG-UI ``RUN_ERROR``, a WebSocket error frame or close, an NDJSON error
line of the stdio presenter, a LangGraph run's error (a gate refusing a resume value:
LangGraph Server's run ``error`` event, ``invoke`` raising)."""

CLOSE_POLICY: Final = 1008
CLOSE_TOO_LARGE: Final = 1009
CLOSE_INTERNAL: Final = 1011


@dataclass(frozen=True)
class RefusalEntry:
    """One code of the vocabulary.

    ``http_status`` is the status an HTTP answer carries (also the status a
    transport without statuses would have used); ``websocket_close`` the code a
    WebSocket closes with for it (a refused handshake that cannot send an HTTP
    status, a connection that must end), None where the refusal is an error frame
    on an open connection or never reaches a WebSocket. ``transports`` are where
    the package sends it today.
    """

    code: str
    meaning: str
    http_status: int
    transports: tuple[Transport, ...]
    websocket_close: int | None = None


BAD_AFTER: Final = "aais.bad_after"
BAD_AUTHENTICATOR: Final = "aais.bad_authenticator"
BAD_HOST: Final = "aais.bad_host"
BAD_LAST_EVENT_ID: Final = "aais.bad_last_event_id"
BINARY_FRAME: Final = "aais.binary_frame"
BODY_TOO_LARGE: Final = "aais.body_too_large"
CONFLICT: Final = "aais.conflict"
CSRF: Final = "aais.csrf"
DIGEST_MISMATCH: Final = "aais.digest_mismatch"
EXPIRED: Final = "aais.expired"
FORBIDDEN: Final = "aais.forbidden"
FOREIGN_ORIGIN: Final = "aais.foreign_origin"
FORWARDED_PROPS_REFUSED: Final = "aais.forwarded_props_refused"
ID_TOO_LONG: Final = "aais.id_too_long"
INTERNAL: Final = "aais.internal"
INVALID: Final = "aais.invalid"
INVALID_CANCEL: Final = "aais.invalid_cancel"
INVALID_ENVELOPE: Final = "aais.invalid_envelope"
INVALID_RESUME: Final = "aais.invalid_resume"
INVALID_TOOLS: Final = "aais.invalid_tools"
LEDGER_INTEGRITY: Final = "aais.ledger_integrity"
LIMIT_EXCEEDED: Final = "aais.limit_exceeded"
LINE_TOO_LARGE: Final = "aais.line_too_large"
PARTIAL_RESUME: Final = "aais.partial_resume"
SIGN_IN_FAILED: Final = "aais.sign_in_failed"
SIGN_IN_PROVIDER: Final = "aais.sign_in_provider"
SIGN_IN_REFUSED: Final = "aais.sign_in_refused"
SIGN_IN_STATE: Final = "aais.sign_in_state"
SLACK_PAYLOAD: Final = "aais.slack_payload"
SLACK_SIGNATURE: Final = "aais.slack_signature"
SLACK_USER: Final = "aais.slack_user"
STALE: Final = "aais.stale"
THREAD_BUSY: Final = "aais.thread_busy"
UNAUTHENTICATED: Final = "aais.unauthenticated"
UNKNOWN_INTERRUPT: Final = "aais.unknown_interrupt"
UNKNOWN_REQUEST: Final = "aais.unknown_request"
UNSUPPORTED_MEDIA_TYPE: Final = "aais.unsupported_media_type"
AGUI_ID_TOO_LONG: Final = "agui.id_too_long"
AGUI_INVALID_INPUT: Final = "agui.invalid_input"
HTTP_ERROR: Final = "http.error"
INBOX_NOT_FOUND: Final = "inbox.not_found"
INBOX_UNKNOWN_DELIVERY: Final = "inbox.unknown_delivery"
INBOX_UNKNOWN_GRANT: Final = "inbox.unknown_grant"

_ENTRIES = (
    RefusalEntry(
        BAD_AFTER,
        "A WebSocket handshake's `?after=` is not a sequence number (ASCII digits).",
        400,
        ("websocket",),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        BAD_AUTHENTICATOR,
        "The server's authenticate callable failed, so nobody could be authenticated.",
        500,
        ("http", "websocket"),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        BAD_HOST,
        "The Host header is not a valid host[:port].",
        400,
        ("http", "websocket"),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        BAD_LAST_EVENT_ID,
        "An event stream's Last-Event-ID is not a sequence number.",
        400,
        ("http",),
    ),
    RefusalEntry(
        BINARY_FRAME,
        "A WebSocket frame was binary; each envelope travels as a text frame.",
        415,
        ("websocket",),
    ),
    RefusalEntry(
        BODY_TOO_LARGE,
        "The body (or WebSocket frame) is over the server's size limit; nothing was read.",
        413,
        ("http",),
        CLOSE_TOO_LARGE,
    ),
    RefusalEntry(
        CONFLICT,
        "The request already holds another resolution; the answer changed nothing.",
        409,
        ("http", "agui"),
    ),
    RefusalEntry(
        CSRF,
        "A cookie session's state change lacks its CSRF token (or carries a wrong one).",
        403,
        ("http", "websocket"),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        DIGEST_MISMATCH,
        "The answer's action digest is not the digest of the requested action.",
        422,
        ("http", "agui"),
    ),
    RefusalEntry(
        EXPIRED,
        "The request expired before the answer arrived; only the expiry was recorded.",
        409,
        ("agui",),
    ),
    RefusalEntry(
        FORBIDDEN,
        "The authenticated principal may not do this; the request stays pending for "
        "someone who may.",
        403,
        ("http", "agui", "websocket", "ndjson", "langgraph"),
    ),
    RefusalEntry(
        FOREIGN_ORIGIN,
        "The request comes from an origin (or a cross-site context) the server refuses.",
        403,
        ("http", "websocket"),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        FORWARDED_PROPS_REFUSED,
        "A run's forwardedProps tried to steer the graph; answers travel in RunAgentInput.resume.",
        422,
        ("agui",),
    ),
    RefusalEntry(
        ID_TOO_LONG,
        "An id in the path or body is longer than the server accepts.",
        422,
        ("http",),
    ),
    RefusalEntry(
        INTERNAL,
        "The server failed while planning the answer; the server log says why, nothing "
        "was recorded.",
        500,
        ("agui",),
        CLOSE_INTERNAL,
    ),
    RefusalEntry(
        INVALID,
        "The authority judged the answer invalid (a policy refused it); the request stays pending.",
        422,
        ("agui",),
    ),
    RefusalEntry(
        INVALID_CANCEL,
        "A cancel's body is not a JSON object with an optional short reason.",
        422,
        ("http",),
    ),
    RefusalEntry(
        INVALID_ENVELOPE,
        "The body is not a valid AAIS 1.0 envelope of the expected type (strict I-JSON); "
        "the pointer names the field.",
        422,
        ("http", "websocket", "ndjson"),
    ),
    RefusalEntry(
        INVALID_RESUME,
        "A resume entry cannot be read as an answer to its interrupt, or left it unresolved.",
        422,
        ("agui", "langgraph"),
    ),
    RefusalEntry(
        INVALID_TOOLS,
        "The page's frontend tools are not I-JSON, so no page revision can be bound.",
        422,
        ("agui",),
    ),
    RefusalEntry(
        LEDGER_INTEGRITY,
        "A stored row failed the audit chain's integrity check; nothing was acted on.",
        503,
        ("http", "websocket", "ndjson"),
        CLOSE_INTERNAL,
    ),
    RefusalEntry(
        LIMIT_EXCEEDED,
        "A new request would exceed a pending or per-minute bound; nothing was stored.",
        429,
        ("agui",),
    ),
    RefusalEntry(
        LINE_TOO_LARGE,
        "An input line of the stdio presenter is over its size limit; it was dropped.",
        413,
        ("ndjson",),
    ),
    RefusalEntry(
        PARTIAL_RESUME,
        "The resume does not answer every open interrupt of the thread.",
        422,
        ("agui",),
    ),
    RefusalEntry(
        SIGN_IN_FAILED,
        "A browser sign-in's answer from the identity provider could not be verified "
        "(issuer, token, claims).",
        400,
        ("http",),
    ),
    RefusalEntry(
        SIGN_IN_PROVIDER,
        "The identity provider of browser sign-in cannot be reached or is misconfigured.",
        502,
        ("http",),
    ),
    RefusalEntry(
        SIGN_IN_REFUSED,
        "The identity provider refused the browser sign-in (the person cancelled or was "
        "not allowed).",
        400,
        ("http",),
    ),
    RefusalEntry(
        SIGN_IN_STATE,
        "A sign-in callback without its state and code, or with no sign-in under way for "
        "its state.",
        400,
        ("http",),
    ),
    RefusalEntry(
        SLACK_PAYLOAD,
        "A signed Slack interaction is not a click on one of this app's approval buttons "
        "(another payload type, channel or button value); nothing was recorded.",
        422,
        ("http",),
    ),
    RefusalEntry(
        SLACK_SIGNATURE,
        "A Slack interaction whose signature does not verify with the app's signing secret, "
        "or whose timestamp is more than five minutes away; nothing was read.",
        401,
        ("http",),
    ),
    RefusalEntry(
        SLACK_USER,
        "The Slack user who clicked is not in the access policy's `[slack_users]`; nothing "
        "was recorded.",
        403,
        ("http",),
    ),
    RefusalEntry(
        STALE,
        "The answer is for a request that is no longer current; it changed nothing.",
        409,
        ("agui", "langgraph"),
    ),
    RefusalEntry(
        THREAD_BUSY,
        "Another run holds the thread's lease; retry shortly.",
        409,
        ("agui",),
    ),
    RefusalEntry(
        UNAUTHENTICATED,
        "No authenticated actor (or the login ended); sign in and retry.",
        401,
        ("http", "agui", "websocket", "langgraph"),
        CLOSE_POLICY,
    ),
    RefusalEntry(
        UNKNOWN_INTERRUPT,
        "A resume entry names an interrupt the thread does not have open (or answers "
        "another interrupt than the one it resumes).",
        422,
        ("agui", "langgraph"),
    ),
    RefusalEntry(
        UNKNOWN_REQUEST,
        "The answer names an approval request the authority never recorded.",
        404,
        ("http", "websocket", "ndjson"),
    ),
    RefusalEntry(
        UNSUPPORTED_MEDIA_TYPE,
        "A state change was not sent as application/json.",
        415,
        ("http",),
    ),
    RefusalEntry(
        AGUI_ID_TOO_LONG,
        "An id of the AG-UI run (thread, run, message, tool call) is longer than the "
        "endpoint accepts; no run started.",
        422,
        ("http",),
    ),
    RefusalEntry(
        AGUI_INVALID_INPUT,
        "The AG-UI endpoint's body is not a valid RunAgentInput (the message names the "
        "field); no run started.",
        422,
        ("http",),
    ),
    RefusalEntry(
        HTTP_ERROR,
        "Any other HTTP error (an unknown path, a method the route does not take) with "
        "the framework's own status and message.",
        404,
        ("http",),
    ),
    RefusalEntry(
        INBOX_NOT_FOUND,
        "The inbox page has no static file of that name.",
        404,
        ("http",),
    ),
    RefusalEntry(
        INBOX_UNKNOWN_DELIVERY,
        "The inbox names no dead notification delivery with that id (or one the viewer "
        "may not retry).",
        404,
        ("http",),
    ),
    RefusalEntry(
        INBOX_UNKNOWN_GRANT,
        "The inbox names no live standing grant with that id.",
        404,
        ("http",),
    ),
)

REFUSALS: Final[Mapping[str, RefusalEntry]] = MappingProxyType(
    {entry.code: entry for entry in _ENTRIES}
)
"""Every refusal code, in code order."""


class Refusal(Exception):
    """An exception that refuses with a code of :data:`REFUSALS`; nothing was recorded.

    ``code`` is the machine-readable code (react to it, never to the message);
    ``pointer`` the JSON pointer of the offending field (``""``: none or the whole
    document). The message (``str()``) names fields and rules, never a value.
    Subclasses set both (as class or instance attributes; a dataclass as fields) and
    keep the built-in base they had (``PermissionError``, ``ValueError``, ...), so
    existing ``except`` clauses still catch them.
    """

    code: str
    pointer: str


def outcome_refusal(outcome: str) -> str:
    """The code refusing an answer the authority resolved ``outcome`` (``conflict``,
    ``stale``, ``invalid``, ``expired``)."""
    code = f"aais.{outcome}"
    if code not in REFUSALS:
        raise KeyError("outcome: not an outcome that refuses an answer")
    return code


def _entry(code: str) -> RefusalEntry:
    try:
        return REFUSALS[code]
    except KeyError:
        raise KeyError("code: not a code of the refusal vocabulary") from None


def http_refusal(code: str, message: str) -> tuple[int, dict[str, str]]:
    """The HTTP status and the ``{"code", "message"}`` error body of a refusal."""
    return _entry(code).http_status, {"code": code, "message": message}


def agui_refusal(code: str, message: str) -> dict[str, str]:
    """The AG-UI ``RUN_ERROR`` fields (``code``, ``message``) of a refusal."""
    _entry(code)
    return {"code": code, "message": message}


def websocket_refusal(code: str, pointer: str, message: str, *, frame: int) -> dict[str, Any]:
    """``{"error": {code, pointer, message, frame}}``: the reply to WebSocket frame ``frame``.

    Args:
        code: a code of :data:`REFUSALS`.
        pointer: the JSON pointer of the field (``""``: none).
        message: why, naming fields, never values.
        frame: the frame answered (from 1).
    """
    _entry(code)
    return {"error": {"code": code, "pointer": pointer, "message": message, "frame": frame}}


def websocket_close_code(code: str) -> int:
    """The close code a WebSocket ends with for a refusal (1008 when the entry has none)."""
    close = _entry(code).websocket_close
    return CLOSE_POLICY if close is None else close


def ndjson_refusal(code: str, pointer: str, message: str, *, line: int) -> dict[str, Any]:
    """``{"error": {code, pointer, message, line}}``: the stdio presenter's reply to input
    line ``line``.

    Args:
        code: a code of :data:`REFUSALS`.
        pointer: the JSON pointer of the field (``""``: none).
        message: why, naming fields, never values.
        line: the input line answered (from 1).
    """
    _entry(code)
    return {"error": {"code": code, "pointer": pointer, "message": message, "line": line}}
