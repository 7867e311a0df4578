"""NDJSON framing for the stdio presenter: bounded input lines, compact output lines, error lines.

Input is split at ``\\n`` into lines of at most ``max_bytes`` (the newline not
counted). A longer line is reported once, when it ends, and its bytes are dropped
as they arrive: nothing buffers more than the limit. Output is one compact JSON
object per line, ASCII only (``\\uXXXX`` escapes), so any terminal encoding
carries it unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..protocol.refusals import ndjson_refusal

__all__ = ["OVERSIZED", "LineFrames", "encode_line", "error_line"]

OVERSIZED = None
"""What :class:`LineFrames` yields for a line longer than its limit."""


class LineFrames:
    """Splits a byte stream into lines of at most ``max_bytes``; ``None`` for a longer one."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes: must be positive")
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._oversized = False

    def feed(self, data: bytes) -> list[bytes | None]:
        """The lines ``data`` completes, in order (``None`` for each oversized one)."""
        lines: list[bytes | None] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end])
            lines.append(self._pop())
            start = end + 1
        self._take(data[start:])
        return lines

    def finish(self) -> list[bytes | None]:
        """The last line when the input ends without a newline (none if nothing is left)."""
        if not self._oversized and not self._buffer:
            return []
        return [self._pop()]

    def _take(self, piece: bytes) -> None:
        if self._oversized:
            return
        if len(self._buffer) + len(piece) > self.max_bytes:
            self._oversized = True
            self._buffer.clear()
        else:
            self._buffer += piece

    def _pop(self) -> bytes | None:
        line = None if self._oversized else bytes(self._buffer)
        self._buffer.clear()
        self._oversized = False
        return line


def encode_line(document: Mapping[str, Any]) -> str:
    """One compact ASCII JSON line (with its newline)."""
    return json.dumps(document, ensure_ascii=True, separators=(",", ":")) + "\n"


def error_line(code: str, pointer: str, message: str, *, line: int) -> dict[str, Any]:
    """``{"error": {code, pointer, message, line}}``: names the field, never its value.

    Args:
        code: the refusal code.
        pointer: the JSON pointer of the field (``""``: none).
        message: why, naming fields, never values.
        line: the input line answered (from 1).
    """
    return ndjson_refusal(code, pointer, message, line=line)
