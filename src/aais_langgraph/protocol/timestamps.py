"""Strict RFC 3339 timestamps: full date, ``T``, seconds, and an explicit offset."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from .errors import AAISValidationError

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})",
    re.ASCII,
)


def parse_timestamp(text: str, pointer: str = "") -> datetime:
    """Parse an RFC 3339 date-time; reject anything without an explicit offset."""
    if not isinstance(text, str) or _RFC3339.fullmatch(text) is None:
        raise AAISValidationError(pointer, "not an RFC 3339 date-time with an explicit offset")
    normalized = text.upper().replace("Z", "+00:00")
    whole, _, rest = normalized.partition(".")
    if rest:
        # Python before 3.11 reads at most 6 fractional digits.
        digits = re.match(r"\d+", rest)
        assert digits is not None
        fraction = digits.group()[:6].ljust(6, "0")
        normalized = f"{whole}.{fraction}{rest[len(digits.group()) :]}"
    try:
        parsed = datetime.fromisoformat(normalized)
    except ValueError:
        raise AAISValidationError(pointer, "not a valid calendar date-time") from None
    return parsed


def format_timestamp(moment: datetime) -> str:
    """Render an aware datetime as RFC 3339 in UTC with a ``Z`` suffix."""
    if moment.tzinfo is None:
        raise ValueError("moment: datetime must be timezone-aware")
    text = moment.astimezone(timezone.utc).isoformat(timespec="microseconds")
    return text.replace("+00:00", "Z")


def utc_now() -> datetime:
    """The current time in UTC, the default clock."""
    return datetime.now(timezone.utc)
