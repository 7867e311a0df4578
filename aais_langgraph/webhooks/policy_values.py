"""Reading one value of an access-policy table (``[[webhooks]]``, ``[[slack]]``, ...):
ValueError names the key and says what it must be, never the value given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def required_text(table: Mapping[str, Any], key: str, where: str) -> str:
    """``table[key]``, a non-empty string."""
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{key}: must be a non-empty string")
    return value


def optional_text(table: Mapping[str, Any], key: str, where: str) -> str | None:
    """``table[key]``, a non-empty string, or None when the key is absent."""
    return None if table.get(key) is None else required_text(table, key, where)


def strings(table: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
    """``table[key]``, an array of non-empty strings (empty when absent)."""
    value = table.get(key, [])
    if (
        not isinstance(value, Sequence)
        or isinstance(value, str)
        or not all(isinstance(item, str) and item for item in value)
    ):
        raise ValueError(f"{where}.{key}: must be an array of non-empty strings")
    return frozenset(value)


def flag(table: Mapping[str, Any], key: str, where: str) -> bool:
    """``table[key]``, true or false (false when absent)."""
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key}: must be true or false")
    return value
