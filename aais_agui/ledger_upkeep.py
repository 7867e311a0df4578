"""Ledger upkeep while serving: periodic retention passes, and the audit tip sent to witnesses.

``aais-agui serve --retention-days N | --retention-last N`` compacts the ledger every
``--retention-every`` seconds (:meth:`Ledger.compact_history
<aais_langgraph.ledger.Ledger.compact_history>`: what is still needed stays).
``--witness FILE|URL`` publishes the tip, sealed with the authority key when one is
set: shortly after it moves (each batch of resolutions, a compaction) and at least
every ``--witness-every`` seconds. A failed pass is logged and tried again at the next
one; nothing here can stop the server.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

from aais_langgraph.authority import load_authority_key
from aais_langgraph.ledger import (
    CompactionReport,
    Ledger,
    RetentionPolicy,
    WitnessedTip,
    WitnessError,
    open_witness,
    publish_compaction,
    publish_tip,
)

__all__ = ["LedgerUpkeep", "UpkeepSettings", "add_upkeep_options", "serving_upkeep", "upkeep_of"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UpkeepSettings:
    """What to keep and where to publish; ``poll``: how often the tip is looked at."""

    policy: RetentionPolicy | None = None
    retention_every: float = 3600.0
    witnesses: tuple[str, ...] = ()
    witness_every: float = 300.0
    poll: float = 2.0

    @property
    def idle(self) -> bool:
        """True when there is nothing to do."""
        return self.policy is None and not self.witnesses


class LedgerUpkeep:
    """One server's upkeep of its ledger: :meth:`tick` does what is due now; :meth:`run`
    ticks every ``settings.poll`` seconds until cancelled."""

    def __init__(self, ledger: Ledger, settings: UpkeepSettings, *, key: bytes | None) -> None:
        self.ledger = ledger
        self.settings = settings
        self.key = key
        self.witnesses = [open_witness(target) for target in settings.witnesses]
        self.published: tuple[int, str] | None = None
        self._published_at = -float("inf")
        self._compacted_at = -float("inf")

    async def compact(self) -> CompactionReport | None:
        """One retention pass (None without a policy), published to the witnesses when it
        removed anything."""
        policy = self.settings.policy
        if policy is None:
            return None
        report = await self.ledger.acompact_history(policy, now=time.time(), key=self.key)
        if report.checkpoint is not None and self.witnesses:
            await asyncio.to_thread(publish_compaction, report, self.witnesses, key=self.key)
            self.published = report.checkpoint
        if report.requests_removed:
            logger.info(
                "retention: %d requests and %d audit entries compacted",
                report.requests_removed,
                report.entries_removed,
            )
        return report

    async def publish(self, *, force: bool = False) -> WitnessedTip | None:
        """Publish the tip if it moved since the last publication (or ``force``)."""
        if not self.witnesses:
            return None
        tip = await self.ledger.aaudit_tip()
        if tip is None or (tip == self.published and not force):
            return None
        witnessed = await asyncio.to_thread(publish_tip, self.ledger, self.witnesses, key=self.key)
        if witnessed is not None:
            self.published = (witnessed.index, witnessed.entry_hash)
        return witnessed

    async def tick(self, now: float | None = None) -> None:
        """Do what is due at ``now`` (monotonic seconds): a retention pass, a publication."""
        moment = time.monotonic() if now is None else now
        try:
            if moment - self._compacted_at >= self.settings.retention_every:
                self._compacted_at = moment
                report = await self.compact()
                if report is not None and report.checkpoint == self.published:
                    self._published_at = moment  # the compaction's publication counts
        except Exception:
            logger.exception("retention pass failed; it runs again at the next interval")
        try:
            heartbeat = moment - self._published_at >= self.settings.witness_every
            if await self.publish(force=heartbeat) is not None or heartbeat:
                self._published_at = moment
        except WitnessError as error:
            logger.warning("publishing the audit tip failed (%s); retried shortly", error)
        except Exception:
            logger.exception("publishing the audit tip failed; retried shortly")

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            await self.tick()
            await asyncio.sleep(self.settings.poll)


def add_upkeep_options(parser: argparse.ArgumentParser) -> None:
    """The server's retention and witness options."""
    group = parser.add_argument_group("retention and witnesses")
    group.add_argument(
        "--retention-days",
        type=float,
        metavar="N",
        help="compact resolved requests older than N days (pending work always stays)",
    )
    group.add_argument(
        "--retention-last",
        type=int,
        metavar="N",
        help="keep only the N most recently resolved requests (with --retention-days: either)",
    )
    group.add_argument(
        "--retention-every",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="how often retention runs; default 3600",
    )
    group.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="FILE|URL",
        help="publish the audit tip to this JSON-lines file or HTTP URL (repeatable)",
    )
    group.add_argument(
        "--witness-every",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="publish at least this often, moved or not; default 300",
    )


def upkeep_of(args: argparse.Namespace) -> UpkeepSettings:
    """The settings the options give; raises ``ValueError`` naming a bad option."""
    days, last = getattr(args, "retention_days", None), getattr(args, "retention_last", None)
    policy = None
    if days is not None or last is not None:
        try:
            policy = RetentionPolicy(keep_days=days, keep_last=last)
        except ValueError:
            raise ValueError("--retention-days, --retention-last: 0 or more") from None
    every = float(getattr(args, "retention_every", 3600.0))
    witness_every = float(getattr(args, "witness_every", 300.0))
    if not (every > 0 and witness_every > 0):
        raise ValueError("--retention-every, --witness-every: must be positive")
    witnesses: Sequence[str] = getattr(args, "witness", None) or ()
    return UpkeepSettings(policy, every, tuple(witnesses), witness_every)


@asynccontextmanager
async def serving_upkeep(
    ledger: Ledger, settings: UpkeepSettings, banner: list[str]
) -> AsyncIterator[LedgerUpkeep | None]:
    """Run the upkeep for the life of the block (nothing when there is nothing to do)."""
    if settings.idle:
        yield None
        return
    upkeep = LedgerUpkeep(ledger, settings, key=load_authority_key())
    if settings.policy is not None:
        banner.append(f"retention  every {settings.retention_every:g}s (aais-langgraph compact)")
    for target in settings.witnesses:
        banner.append(f"witness    {target}")
    task = asyncio.create_task(upkeep.run())
    try:
        yield upkeep
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
