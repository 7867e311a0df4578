"""The per-thread run lease: one presenter at a time drives a paused thread.

While a block holds the lease, the process's one renewer thread renews it every
third of its TTL, so a run that takes longer than the TTL (a slow approved
action) keeps it: a presenter retrying meanwhile waits instead of resuming the
same interrupt again.
A holder that dies stops renewing, so it blocks the thread for at most one TTL,
and not at all when it ran on this host: a holder's name records its host, boot,
PID and the PID's start time, so a process that finds the lease held by a dead
local process (or by a PID since reused by another process) releases it at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager

from ..ledger import Lease, Ledger
from ..ledger.executions import ExecutionChange
from ..ledger.holders import holder_is_dead, new_holder
from .errors import LeaseHeldError

DEFAULT_LEASE_TTL = 60.0


def release_dead_holder(ledger: Ledger, thread_id: str, *, now: float) -> bool:
    """Release the thread's unexpired lease if its holder is a dead local process;
    True when it did (only that holder's row is deleted, so a live taker is safe)."""
    lease = ledger.get_lease(thread_id)
    if lease is None or lease.expires_at <= now or not holder_is_dead(lease.holder):
        return False
    return ledger.release_lease(thread_id, lease.holder)


async def arelease_dead_holder(ledger: Ledger, thread_id: str, *, now: float) -> bool:
    """Async twin of :func:`release_dead_holder`."""
    lease = await ledger.aget_lease(thread_id)
    if lease is None or lease.expires_at <= now or not holder_is_dead(lease.holder):
        return False
    return await ledger.arelease_lease(thread_id, lease.holder)


_IDLE_BEAT = 1.0
"""The longest the renewer thread sleeps: a lease due later needs no wake-up call."""


class _Beat:
    """One daemon thread per process renewing every held lease at a third of its TTL.

    Started on the first lease and kept: a run costs no thread start or join (a
    run shorter than a third of the TTL never renews at all). The thread looks at
    its leases at least every :data:`_IDLE_BEAT` seconds, so taking a lease due
    later than that does not wake it (no thread switch on a short run). Renewals
    run one after another; a failed one (the database briefly unreachable) is
    retried at the lease's next beat, and if none lands the lease simply expires.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[_Renewer, float] = {}
        self._thread: threading.Thread | None = None
        self._wake_at = 0.0

    def add(self, renewer: _Renewer) -> None:
        with self._cond:
            due = time.monotonic() + renewer.ttl / 3
            self._due[renewer] = due
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="aais-leases", daemon=True)
                self._thread.start()
            elif due < self._wake_at:
                self._cond.notify()

    def remove(self, renewer: _Renewer) -> None:
        with self._cond:
            self._due.pop(renewer, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                ready = [r for r, due in self._due.items() if due <= now]
                if not ready:
                    self._wake_at = min(self._due.values(), default=now + _IDLE_BEAT)
                    self._wake_at = min(self._wake_at, now + _IDLE_BEAT)
                    self._cond.wait(self._wake_at - now)
                    continue
                for renewer in ready:
                    self._due[renewer] = now + renewer.ttl / 3
            for renewer in ready:
                if renewer.beat() is False:
                    self.remove(renewer)

    def reset(self) -> None:
        """In a forked child: no renewer thread exists there, no lease is held."""
        self._cond = threading.Condition()
        self._due = {}
        self._thread = None
        self._wake_at = 0.0


_BEAT = _Beat()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_BEAT.reset)


class _Renewer:
    """Keeps one held lease renewed (on the shared :class:`_Beat`) until stopped.

    ``lost`` turns True if another holder took the lease (only possible after it
    expired).
    """

    def __init__(self, ledger: Ledger, lease: Lease, ttl: float) -> None:
        self._ledger = ledger
        self._lease = lease
        self.ttl = ttl
        self.lost = False
        _BEAT.add(self)

    def beat(self) -> bool:
        """Renew once; False when the lease was lost (stop renewing)."""
        try:
            renewed = self._ledger.renew_lease(
                self._lease.thread_id, self._lease.holder, ttl=self.ttl, now=time.time()
            )
        except Exception:  # transient: the next beat tries again
            return True
        if renewed is None:
            self.lost = True
            return False
        return True

    def stop(self) -> None:
        """Stop renewing. A renewal still in flight is harmless after the release
        (it matches no row)."""
        _BEAT.remove(self)


@contextmanager
def run_lease(
    ledger: Ledger,
    thread_id: str,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
    wait: float = 0.0,
    holder: str | None = None,
    done: Sequence[str] = (),
    executions: Mapping[str, ExecutionChange] | None = None,
) -> Iterator[Lease]:
    """Hold ``thread_id``'s lease for the block, or raise :class:`LeaseHeldError`.

    ``wait`` seconds are spent retrying while another holder has it. The lease
    is renewed while the block runs and expires ``ttl`` seconds after the last
    renewal, so a crashed holder blocks no one for longer than ``ttl``. ``done``
    (a list the block may append to) names the requests whose resume work the
    block finished: marked done in the release's write.

    Args:
        ledger: where the lease is kept.
        thread_id: the thread to hold.
        ttl: seconds the lease lives after its last renewal.
        wait: seconds to keep retrying while another holder has it.
        holder: this holder's id (default: one naming this process).
        done: request ids whose resume work the block finished, marked done on release.
        executions: execution changes the block's end makes (a dict it may fill: the
            claims its run settled ``executed``), made in the release's write.
    """
    name = holder or new_holder()
    deadline = time.monotonic() + wait
    while True:
        lease = ledger.acquire_lease(thread_id, name, ttl=ttl, now=time.time())
        if lease is not None:
            break
        if release_dead_holder(ledger, thread_id, now=time.time()):
            continue
        if time.monotonic() >= deadline:
            raise LeaseHeldError()
        time.sleep(0.05)
    renewer = _Renewer(ledger, lease, ttl)
    try:
        yield lease
    finally:
        renewer.stop()
        if executions:
            try:
                ledger.release_lease(thread_id, name, done=tuple(done), executions=executions)
            except BaseException:
                # A record that fails its check keeps its claim; the lease is released.
                ledger.release_lease(thread_id, name, done=tuple(done))
                raise
        else:
            ledger.release_lease(thread_id, name, done=tuple(done))


@asynccontextmanager
async def arun_lease(
    ledger: Ledger,
    thread_id: str,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
    wait: float = 0.0,
    holder: str | None = None,
    done: Sequence[str] = (),
    executions: Mapping[str, ExecutionChange] | None = None,
) -> AsyncIterator[Lease]:
    """Async twin of :func:`run_lease` (renewed from a thread, so a blocked loop keeps it)."""
    name = holder or new_holder()
    deadline = time.monotonic() + wait
    while True:
        lease = await ledger.aacquire_lease(thread_id, name, ttl=ttl, now=time.time())
        if lease is not None:
            break
        if await arelease_dead_holder(ledger, thread_id, now=time.time()):
            continue
        if time.monotonic() >= deadline:
            raise LeaseHeldError()
        await asyncio.sleep(0.05)
    renewer = _Renewer(ledger, lease, ttl)
    try:
        yield lease
    finally:
        renewer.stop()
        if executions:
            try:
                await ledger.arelease_lease(
                    thread_id, name, done=tuple(done), executions=executions
                )
            except BaseException:
                await ledger.arelease_lease(thread_id, name, done=tuple(done))
                raise
        else:
            await ledger.arelease_lease(thread_id, name, done=tuple(done))
