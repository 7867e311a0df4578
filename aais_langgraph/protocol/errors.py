"""The one error type the protocol layer raises for input that is not valid AAIS."""

from __future__ import annotations


def escape_pointer_token(token: str | int) -> str:
    """Escape one JSON-pointer reference token (RFC 6901)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join_pointer(base: str, *tokens: str | int) -> str:
    """Append reference tokens to a JSON pointer."""
    return base + "".join("/" + escape_pointer_token(token) for token in tokens)


class AAISValidationError(ValueError):
    """Input is not valid AAIS 1.0.

    ``pointer`` is the JSON pointer (RFC 6901) of the offending location, ``""``
    for the whole document. The message names the location and the rule, and
    never echoes the offending value, so it is safe to log and show.
    """

    def __init__(self, pointer: str, reason: str) -> None:
        self.pointer = pointer
        self.reason = reason
        super().__init__(f"{pointer or '/'}: {reason}")
