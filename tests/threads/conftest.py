"""The gate tests' backends and effects log, for the tests of what drives threads from outside."""

from __future__ import annotations

from gate.conftest import backend, effects, memory_backend, sqlite_backend

__all__ = ["backend", "effects", "memory_backend", "sqlite_backend"]
