"""A small cache of validated envelopes read back from the ledger.

Requests and resolutions never change once stored, yet one approval round trip
reads the same ones several times; validating them again (including the action
digest) was most of the authority's CPU cost on the hot path.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from ..protocol import ApprovalRequested, Envelope

E = TypeVar("E", bound=Envelope)
K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A thread-safe map that drops its least recently used entries past ``size``."""

    def __init__(self, size: int = 2048) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: K, value: V) -> V:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value


class EnvelopeCache(Generic[E]):
    """Validated models of stored envelopes, by event id and sequence; least recently
    used entries are dropped past ``size``."""

    def __init__(self, model: type[E], size: int = 2048) -> None:
        self._model = model
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, ...], E] = OrderedDict()

    def load(self, envelope: Mapping[str, Any]) -> E:
        """The validated model of a stored envelope (validated once per process)."""
        key = (envelope.get("id"), envelope.get("sequence"), envelope.get("occurred_at"))
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
        model = self._model.from_data(envelope)
        self.remember(model)
        return model

    def remember(self, model: E) -> E:
        """Keep a model that was just validated or built, e.g. a newly stored request."""
        key = (model.id, model.sequence, model.occurred_at)
        with self._lock:
            self._entries[key] = model
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return model


def request_cache() -> EnvelopeCache[ApprovalRequested]:
    """A cache for stored ``approval.requested`` envelopes."""
    return EnvelopeCache(ApprovalRequested)
