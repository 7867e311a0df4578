"""The per-thread run lease: one presenter at a time drives a paused thread."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from ..ledger import Lease, Ledger
from .errors import LeaseHeldError

DEFAULT_LEASE_TTL = 60.0


def new_holder() -> str:
    """A unique lease-holder name for one resume."""
    return f"holder_{uuid.uuid4().hex}"


@contextmanager
def run_lease(
    ledger: Ledger,
    thread_id: str,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
    wait: float = 0.0,
    holder: str | None = None,
) -> Iterator[Lease]:
    """Hold ``thread_id``'s lease for the block, or raise :class:`LeaseHeldError`.

    ``wait`` seconds are spent retrying while another holder has it. The lease
    expires after ``ttl`` seconds, so a crashed holder blocks no one for longer.
    """
    name = holder or new_holder()
    deadline = time.monotonic() + wait
    while True:
        lease = ledger.acquire_lease(thread_id, name, ttl=ttl, now=time.time())
        if lease is not None:
            break
        if time.monotonic() >= deadline:
            raise LeaseHeldError()
        time.sleep(0.05)
    try:
        yield lease
    finally:
        ledger.release_lease(thread_id, name)


@asynccontextmanager
async def arun_lease(
    ledger: Ledger,
    thread_id: str,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
    wait: float = 0.0,
    holder: str | None = None,
) -> AsyncIterator[Lease]:
    """Async twin of :func:`run_lease`."""
    name = holder or new_holder()
    deadline = time.monotonic() + wait
    while True:
        lease = await ledger.aacquire_lease(thread_id, name, ttl=ttl, now=time.time())
        if lease is not None:
            break
        if time.monotonic() >= deadline:
            raise LeaseHeldError()
        await asyncio.sleep(0.05)
    try:
        yield lease
    finally:
        await ledger.arelease_lease(thread_id, name)
