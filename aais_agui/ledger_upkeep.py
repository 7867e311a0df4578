"""Ledger upkeep while serving: retention passes, and the audit tip sent to witnesses.

Two periodic jobs of the :class:`~aais_agui.service.ApprovalService` run it, off unless
its settings ask: ``retention`` compacts the ledger every ``retention_every`` seconds
(:meth:`Ledger.compact_history <aais_langgraph.ledger.Ledger.compact_history>`: what is
still needed stays), and ``witness`` publishes the tip to ``witnesses``, sealed with the
authority key when one is set: shortly after it moves (each batch of resolutions, a
compaction; looked at every ``witness_poll`` seconds) and at least every
``witness_every`` seconds. Both seal with the authority's key (``ApprovalAuthority.key``,
resolved once where the authority was made), whichever way it was given.
``aais-agui serve --retention-days N | --retention-last N | --witness FILE|URL`` sets
them. With witnesses, the ledger is checked against them when serving starts and after
each retention pass (:meth:`LedgerUpkeep.check_witnesses`): a history a witness
contradicts makes the service's authority refuse every row (gates, grants and resumes
run nothing) until an operator looks. A failed pass is logged and tried again at the next
one; nothing here can stop the server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aais_langgraph.ledger import (
    CompactionReport,
    Ledger,
    WitnessedTip,
    WitnessError,
    check_witness,
    open_witness,
    publish_compaction,
    publish_tip,
)

if TYPE_CHECKING:
    from .service import ServiceSettings

__all__ = ["LedgerUpkeep", "upkeep_banner"]

logger = logging.getLogger(__name__)


class LedgerUpkeep:
    """One server's upkeep of its ledger: :meth:`retention_pass` and :meth:`witness_pass`
    are the two jobs' passes (one at a time: a compaction's publication and the tip's
    never interleave); :meth:`tick` does both.

    Args:
        ledger: the served authority's ledger.
        settings: the service's settings (retention policy, witnesses, intervals).
        key: the authority's key (``ApprovalAuthority.key``), else the one the authority
            handed the ledger: never the environment read again.
        on_contradiction: called with the reason when a witness contradicts the history.
    """

    def __init__(
        self,
        ledger: Ledger,
        settings: ServiceSettings,
        *,
        key: bytes | None = None,
        on_contradiction: Callable[[str], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.settings = settings
        self.on_contradiction = on_contradiction
        self.contradiction: str | None = None
        self.key = key if key is not None else ledger.authority_key
        self.witnesses = [open_witness(target) for target in settings.witnesses]
        self.published: tuple[int, str] | None = None
        self._published_at = -float("inf")
        self._compacted_at = -float("inf")
        self._one_at_a_time = asyncio.Lock()

    async def compact(self) -> CompactionReport | None:
        """One retention pass (None without a policy), published to the witnesses when it
        removed anything."""
        policy = self.settings.retention
        if policy is None:
            return None
        report = await self.ledger.acompact_history(policy, now=time.time(), key=self.key)
        if report.checkpoint is not None and self.witnesses:
            await asyncio.to_thread(publish_compaction, report, self.witnesses, key=self.key)
            self.published = report.checkpoint
        await self.check_witnesses()
        if report.requests_removed:
            logger.info(
                "retention: %d requests and %d audit entries compacted",
                report.requests_removed,
                report.entries_removed,
            )
        return report

    async def check_witnesses(self) -> str | None:
        """Check the ledger against what each witness holds (at start and after each
        retention pass): the first contradiction (a rollback, a fork, an unwitnessed
        compaction, a bad seal) is logged and handed to ``on_contradiction`` (the
        service's authority then refuses every row), and returned; None when all agree."""
        for witness in self.witnesses:
            try:
                published = await asyncio.to_thread(witness.publications)
            except WitnessError as error:  # unreachable: nothing to compare, not a contradiction
                logger.warning("reading a witness failed (%s); checked again later", error)
                continue
            if not published:
                continue
            check = await asyncio.to_thread(check_witness, self.ledger, published, key=self.key)
            if not check.ok:
                reason = f"a witness contradicts the ledger's history ({check.verdict})"
                logger.error("%s: %s; refusing to act on the ledger", reason, check.message)
                self.contradiction = reason
                if self.on_contradiction is not None:
                    self.on_contradiction(reason)
                return reason
        return None

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

    async def retention_pass(self, now: float | None = None) -> None:
        """A retention pass if one is due at ``now`` (monotonic seconds); a failure is
        logged, and the pass runs again at the next interval."""
        moment = time.monotonic() if now is None else now
        async with self._one_at_a_time:
            try:
                if moment - self._compacted_at >= self.settings.retention_every:
                    self._compacted_at = moment
                    report = await self.compact()
                    if report is not None and report.checkpoint == self.published:
                        self._published_at = moment  # the compaction's publication counts
            except Exception:
                logger.exception("retention pass failed; it runs again at the next interval")

    async def witness_pass(self, now: float | None = None) -> None:
        """Publish the tip if it moved, or if the heartbeat is due at ``now``; a failure
        is logged, and retried at the next pass."""
        moment = time.monotonic() if now is None else now
        async with self._one_at_a_time:
            try:
                heartbeat = moment - self._published_at >= self.settings.witness_every
                if await self.publish(force=heartbeat) is not None or heartbeat:
                    self._published_at = moment
            except WitnessError as error:
                logger.warning("publishing the audit tip failed (%s); retried shortly", error)
            except Exception:
                logger.exception("publishing the audit tip failed; retried shortly")

    async def tick(self, now: float | None = None) -> None:
        """Do what is due at ``now`` (monotonic seconds): a retention pass, a publication."""
        moment = time.monotonic() if now is None else now
        await self.retention_pass(moment)
        await self.witness_pass(moment)


def upkeep_banner(settings: ServiceSettings) -> list[str]:
    """The lines ``aais-agui serve`` prints for the upkeep ``settings`` ask for."""
    lines = []
    if settings.retention is not None:
        lines.append(f"retention  every {settings.retention_every:g}s (aais-langgraph compact)")
    lines.extend(f"witness    {target}" for target in settings.witnesses)
    return lines
