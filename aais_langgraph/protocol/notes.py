"""The reviewer's note on a decision: attaching it, checking it, reading it from a resolution.

AAIS 1.0 has no standard field for a reviewer's comment, so the note travels in
the decision's ``aais-langgraph.org/note`` extension. The authority checks it
(:func:`decision_note`: a string of 1 to ``NOTE_MAX_LENGTH`` characters; anything
else is refused before anything is recorded) and copies it into the resolution's
extensions, where the audit chain vouches for it. A tool configured with
``reviewer_note=True`` shows it to the model when the call is denied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .envelopes import ApprovalDecided, ApprovalResolved
from .errors import AAISValidationError
from .extensions import NOTE_EXTENSION, NOTE_MAX_LENGTH
from .parsing import parse_envelope
from .parts import Decision

__all__ = ["NOTE_EXTENSION", "NOTE_MAX_LENGTH", "decision_note", "note_of", "with_note"]

_POINTER = "/decision/extensions/" + NOTE_EXTENSION.replace("/", "~1")


def with_note(
    decided: ApprovalDecided | Mapping[str, Any] | str | bytes, note: str
) -> ApprovalDecided:
    """``decided`` carrying the reviewer's ``note`` (checked when the authority records it)."""
    envelope = parse_envelope(decided, expected=ApprovalDecided)
    document = envelope.to_json()
    extensions = {**(document["decision"].get("extensions") or {}), NOTE_EXTENSION: note}
    document["decision"]["extensions"] = extensions
    return ApprovalDecided.from_data(document)


def decision_note(decision: Decision) -> str | None:
    """The reviewer's note ``decision`` carries, checked; raises
    :class:`AAISValidationError` (naming the field, never the value) for a bad one."""
    if not decision.extensions or NOTE_EXTENSION not in decision.extensions:
        return None
    note = decision.extensions[NOTE_EXTENSION]
    if not isinstance(note, str) or not 0 < len(note) <= NOTE_MAX_LENGTH:
        raise AAISValidationError(
            _POINTER, f"a reviewer note must be a string of 1 to {NOTE_MAX_LENGTH} characters"
        )
    return note


def note_of(resolved: ApprovalResolved) -> str | None:
    """The reviewer's note recorded with ``resolved``, if its decision carried one."""
    note = (resolved.resolution.extensions or {}).get(NOTE_EXTENSION)
    return note if isinstance(note, str) and note else None
