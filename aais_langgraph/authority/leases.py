"""The per-thread run lease: one presenter at a time drives a paused thread.

While a block holds the lease, a daemon thread renews it every third of its TTL,
so a run that takes longer than the TTL (a slow approved action) keeps it: a
presenter retrying meanwhile waits instead of resuming the same interrupt again.
A holder that dies stops renewing, so it blocks the thread for at most one TTL.
"""

from __future__ import annotations

import asyncio
import threading
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


class _Renewer:
    """Renews a held lease every ``ttl / 3`` seconds from a daemon thread until stopped.

    A failed renewal (the database briefly unreachable) is retried at the next beat;
    if none lands the lease simply expires. ``lost`` turns True if another holder
    took the lease (only possible after it expired).
    """

    def __init__(self, ledger: Ledger, lease: Lease, ttl: float) -> None:
        self._ledger = ledger
        self._lease = lease
        self._ttl = ttl
        self._stopped = threading.Event()
        self.lost = False
        self._thread = threading.Thread(
            target=self._run, name=f"aais-lease-{lease.thread_id}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._ttl / 3):
            try:
                renewed = self._ledger.renew_lease(
                    self._lease.thread_id, self._lease.holder, ttl=self._ttl, now=time.time()
                )
            except Exception:  # transient: the next beat tries again
                continue
            if renewed is None:
                self.lost = True
                return

    def stop(self) -> None:
        """Stop renewing. A renewal still in flight is harmless after the release
        (it matches no row), so a slow one is not waited for beyond a second."""
        self._stopped.set()
        self._thread.join(timeout=1.0)


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
    is renewed while the block runs and expires ``ttl`` seconds after the last
    renewal, so a crashed holder blocks no one for longer than ``ttl``.
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
    renewer = _Renewer(ledger, lease, ttl)
    try:
        yield lease
    finally:
        renewer.stop()
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
    """Async twin of :func:`run_lease` (renewed from a thread, so a blocked loop keeps it)."""
    name = holder or new_holder()
    deadline = time.monotonic() + wait
    while True:
        lease = await ledger.aacquire_lease(thread_id, name, ttl=ttl, now=time.time())
        if lease is not None:
            break
        if time.monotonic() >= deadline:
            raise LeaseHeldError()
        await asyncio.sleep(0.05)
    renewer = _Renewer(ledger, lease, ttl)
    try:
        yield lease
    finally:
        await asyncio.to_thread(renewer.stop)
        await ledger.arelease_lease(thread_id, name)
