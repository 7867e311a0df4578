"""The compact JSON text of envelopes, each request's text written once per model.

A served snapshot is mostly its pending requests, and they are the same models from
one listing to the next (the inbox remembers each vouched row's validated envelope).
So a request's text is written once per model and kept while the model lives, and a
snapshot's text is its small header around those texts, not a dump of every request
again (then a second pass of a JSON encoder over the dump). The text is the JSON
value of :meth:`~.base.AAISModel.to_json`: compact, UTF-8 (no ``\\u`` escapes of
non-ASCII characters), members in the schema's order.
"""

from __future__ import annotations

import json
import threading
import weakref
from typing import Any

from .envelopes import ApprovalSnapshot, Envelope
from .parts import Request

__all__ = ["envelope_text", "request_text"]

_LOCK = threading.RLock()
"""Re-entrant: a collected model's weak reference callback may run on this thread while
it holds the lock (a garbage collection started by an allocation there)."""
_TEXTS: dict[int, tuple[weakref.ref[Request], str]] = {}
"""id of a live Request model -> (a weak reference to it, its text)."""


def _dumps(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def request_text(request: Request) -> str:
    """The JSON text of ``request``, written once per model (while the model lives).

    Models are frozen; the text is what the model held when it was first written, so a
    caller who edits a request's nested ``arguments`` dict in place (never the
    listing's own) does not see that edit here."""
    key = id(request)
    with _LOCK:
        found = _TEXTS.get(key)
    if found is not None and found[0]() is request:
        return found[1]
    text = request.model_dump_json()

    def forget(reference: weakref.ref[Request]) -> None:
        with _LOCK:
            entry = _TEXTS.get(key)
            if entry is not None and entry[0] is reference:
                del _TEXTS[key]

    entry = (weakref.ref(request, forget), text)
    with _LOCK:
        _TEXTS[key] = entry
    return text


def envelope_text(envelope: Envelope) -> str:
    """The compact JSON text of ``envelope``; a snapshot's pending requests come from
    :func:`request_text`."""
    if not isinstance(envelope, ApprovalSnapshot):
        return _dumps(envelope.to_json())
    body = envelope.snapshot
    header = envelope.model_copy(update={"snapshot": body.model_copy(update={"pending": []})})
    document = header.to_json()
    if list(document)[-1] != "snapshot" or list(document["snapshot"]) != [
        "as_of_sequence",
        "pending",
    ]:  # pragma: no cover - the schema's order puts the payload last
        return _dumps(envelope.to_json())
    del document["snapshot"]
    pending = ",".join(request_text(request) for request in body.pending)
    head = _dumps(document)[:-1]
    return f'{head},"snapshot":{{"as_of_sequence":{body.as_of_sequence},"pending":[{pending}]}}}}'
