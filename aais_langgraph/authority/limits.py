"""Bounds on what one session or one requester may keep pending, and how fast they may ask.

The AAIS security model asks authorities to bound the number of pending
approvals per actor and the activity rate (security.md, "Denial of service"):
an agent looping on a gated tool, or one user starting runs without end, must
not bury everyone else's approvals. The *requester* is the authenticated person
a run acts for (``configurable["aais_requester"]``, which the AG-UI server sets
to the signed-in user); the *session* is the request's ``origin.session_id``
(the thread, by default).

A request over a bound is refused before anything is stored, with
:class:`RequestLimitError` naming the bound, never a value; the run stops there
and nothing recorded is lost (its checkpoint is the one before the gated step,
so retrying later asks again). Pending counts come from the ledger (an indexed
read of at most the bound's rows, so every process sees the same counts; two
processes asking at the same instant may each pass the last free place); the
rate is counted in this process over a sliding minute.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from ..ledger import Ledger
from ..protocol import AAISValidationError
from ..protocol.refusals import LIMIT_EXCEEDED, Refusal

__all__ = ["Bounds", "RequestLimitError", "RequestLimits", "checked_requester"]


@dataclass(frozen=True)
class RequestLimits:
    """How many requests may be pending, and how many may be asked for per minute.

    ``None`` turns a bound off; ``RequestLimits.unbounded()`` turns them all off.

    Args:
        pending_per_session: pending requests one ``origin.session_id`` may hold.
        pending_per_requester: pending requests one requester may hold, over all
            their sessions and threads.
        requests_per_minute: new requests one requester may make in any sliding
            minute, counted per process (a run without a requester is in-process
            code, which only the pending bounds hold back).
    """

    pending_per_session: int | None = 500
    pending_per_requester: int | None = 2000
    requests_per_minute: int | None = 600

    def __post_init__(self) -> None:
        for name in ("pending_per_session", "pending_per_requester", "requests_per_minute"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}: must be a positive integer or None")

    @classmethod
    def unbounded(cls) -> RequestLimits:
        """No bound at all (a trusted single-user deployment, a benchmark)."""
        return cls(None, None, None)


class RequestLimitError(AAISValidationError, Refusal):
    """A new request would exceed a bound of :class:`RequestLimits`; nothing was stored.

    ``code`` is ``aais.limit_exceeded`` (HTTP 429 where a channel has a status);
    ``retry_after`` is the seconds until the rate allows another request (None for a
    pending bound, which frees up as requests resolve).
    """

    code = LIMIT_EXCEEDED

    def __init__(self, pointer: str, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(pointer, reason)
        self.retry_after = retry_after


def checked_requester(value: object, field: str) -> str | None:
    """``value`` as a requester id (None stays None): a string of 1 to 200 characters
    without control characters, else ValueError naming ``field``."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= 200
        or any(ord(char) < 0x20 or ord(char) == 0x7F for char in value)
    ):
        raise ValueError(f"{field}: must be an id of 1 to 200 characters, no control characters")
    return value


class _SlidingMinute:
    """Request times per key over the last minute, for a bounded number of keys."""

    def __init__(self, clock: Callable[[], float], keys: int = 10_000) -> None:
        self._clock = clock
        self._keys = keys
        self._lock = threading.Lock()
        self._times: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, key: str, limit: int) -> float | None:
        """Count one request for ``key``; None if allowed, else seconds until it would be."""
        now = self._clock()
        with self._lock:
            times = self._times.pop(key, None) or deque()
            while times and times[0] <= now - 60.0:
                times.popleft()
            self._times[key] = times
            while len(self._times) > self._keys:
                self._times.popitem(last=False)
            if len(times) >= limit:
                return min(max(times[0] + 60.0 - now, 0.0), 60.0)
            times.append(now)
            return None


class Bounds:
    """The checks :class:`RequestLimits` asks for, run before a request is stored."""

    def __init__(
        self, limits: RequestLimits, ledger: Ledger, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self._ledger = ledger
        self._rate = _SlidingMinute(clock)

    def check(self, session_id: str, requester: str | None) -> None:
        """Raise :class:`RequestLimitError` if one more request would exceed a bound."""
        limits = self.limits
        per_session = limits.pending_per_session
        if per_session is not None:
            held = self._ledger.count_pending(session_id=session_id, limit=per_session)
            if held >= per_session:
                raise RequestLimitError(
                    "/request/origin/session_id",
                    f"the session already holds {per_session} pending approvals "
                    "(its bound); resolve some before asking again",
                )
        per_requester = limits.pending_per_requester
        if requester is not None and per_requester is not None:
            held = self._ledger.count_pending(requester=requester, limit=per_requester)
            if held >= per_requester:
                raise RequestLimitError(
                    "/requester",
                    f"the requester already holds {per_requester} pending approvals "
                    "(their bound); resolve some before asking again",
                )
        rate = limits.requests_per_minute
        if requester is not None and rate is not None:
            wait = self._rate.take(requester, rate)
            if wait is not None:
                raise RequestLimitError(
                    "/requester",
                    f"more than {rate} approval requests in a minute (the rate bound); "
                    f"retry in {wait:.0f} s",
                    retry_after=wait,
                )
