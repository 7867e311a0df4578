"""Strict RFC 3339 timestamps: full date, ``T``, seconds, and an explicit offset."""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

from .errors import AAISValidationError

_DAY = (
    r"(?!0000)[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    r"|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_DAY = (
    r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
)
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?"
_OFFSET = r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"

RFC3339_PATTERN = f"(?:{_DAY}|{_LEAP_DAY})[Tt]{_TIME}{_OFFSET}"
"""An RFC 3339 date-time with seconds and an explicit offset, calendar-exact (years 0001-9999,
no leap second), in the regex dialect Python and ECMA-262 share (JSON Schema ``pattern``)."""

_RFC3339 = re.compile(RFC3339_PATTERN)
_DIGITS = re.compile(r"\d+")


def parse_timestamp(text: str, pointer: str = "") -> datetime:
    """Parse an RFC 3339 date-time; reject one without an explicit offset or off the calendar."""
    if not isinstance(text, str):
        raise AAISValidationError(pointer, "not an RFC 3339 date-time with an explicit offset")
    parsed = _parsed(text)
    if isinstance(parsed, str):
        raise AAISValidationError(pointer, parsed)
    return parsed


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> datetime | str:
    """The moment ``text`` names, or why it names none (kept: one envelope's timestamps are
    read by several validators, and datetimes are immutable)."""
    if _RFC3339.fullmatch(text) is None:
        return "not an RFC 3339 date-time with an explicit offset"
    normalized = text.upper().replace("Z", "+00:00")
    whole, _, rest = normalized.partition(".")
    if rest:
        # Python before 3.11 reads at most 6 fractional digits.
        digits = _DIGITS.match(rest)
        assert digits is not None
        fraction = digits.group()[:6].ljust(6, "0")
        normalized = f"{whole}.{fraction}{rest[len(digits.group()) :]}"
    try:
        return datetime.fromisoformat(normalized)
    except ValueError:
        return "not a valid calendar date-time"


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as RFC 3339 in UTC with a ``Z`` suffix."""
    if moment.tzinfo is None:
        raise ValueError("moment: datetime must be timezone-aware")
    text = moment.astimezone(timezone.utc).isoformat(timespec="microseconds")
    return text.replace("+00:00", "Z")


def utc_now() -> datetime:
    """The current time in UTC, the default clock."""
    return datetime.now(timezone.utc)
