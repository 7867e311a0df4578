"""The served process: one :class:`ApprovalService` owns the thread driver, the periodic
jobs and the lifespan of a server for one graph, configured by one :class:`ServiceSettings`.

Built once, handed to whatever serves: ``create_app``, the routers
(:func:`~aais_agui.http.approvals.approvals_router`,
:func:`~aais_agui.http.websocket.websocket_router`,
:func:`~aais_agui.http.inbox.inbox_router`), the AG-UI agent and ``aais-agui serve``.
Every resume they start, the watcher's and the background ones alike, goes through
the service's one :class:`~aais_langgraph.threads.ThreadDriver`, so one setting
(``lease_wait``, say) holds for every channel. While it serves
(:meth:`ApprovalService.lifespan`) it runs its named periodic jobs
(:mod:`aais_agui.scheduler`), each at the interval its setting gives (None: off):

- ``resume_due`` (``resume_due_every``): resumes threads whose approvals another process
  recorded, and the ledger's due resume work (:mod:`aais_agui.watcher`);
- ``sweep_expired`` (``sweep_expired_every``, off by default): resolves overdue requests
  ``expired`` and resumes their runs;
- ``orphans`` (``orphans_every``): cancels the requests their thread left behind;
- ``inbox`` (``inbox_every``): lists what is pending as a snapshot does, so the rows
  a first snapshot after a start shows are vouched for and validated before anyone
  asks (a snapshot asked for while it works waits for its work instead of repeating it);
- ``deliveries`` (``deliveries_every``, with ``webhooks`` or ``slack``): sends webhook
  deliveries and posts and rewrites the Slack app channels' messages;
- ``follow_ups`` (``follow_ups_every``, when the ledger's plan has an access policy that
  reminds, escalates or notifies requesters): runs the due reminders, escalations and
  requester notices (:class:`~aais_langgraph.webhooks.FollowUpRunner`), by the
  authority's clock, which the ``deliveries`` job then keeps too;
- ``retention`` (``retention_every``, with ``retention``) and ``witness``
  (``witness_poll``, with ``witnesses``): :mod:`aais_agui.ledger_upkeep`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aais_langgraph.authority import DEFAULT_LEASE_TTL, ApprovalAuthority
from aais_langgraph.ledger import RetentionPolicy
from aais_langgraph.protocol import envelope_text
from aais_langgraph.threads import DEFAULT_LEASE_WAIT, ThreadDriver, apending_approvals
from aais_langgraph.tools import PageToolGate

from .background import BackgroundResumes
from .ledger_upkeep import LedgerUpkeep
from .scheduler import PeriodicJob, Scheduler
from .served_graph import (
    check_takes_checkpointer,
    opens_checkpointer,
    refuse_other_ledgers,
    served_graph,
)
from .watcher import DecisionWatcher

if TYPE_CHECKING:
    from aais_langgraph.authority import Principal
    from aais_langgraph.protocol import ApprovalSnapshot
    from aais_langgraph.webhooks import SlackApp, SlackChannel, WebhookSubscription, WebhookWorker

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ApprovalService", "ServiceSettings"]

DEFAULT_MAX_BODY_BYTES = 1_000_000
"""The largest request body (and WebSocket frame) a server reads, in bytes."""


@dataclass(frozen=True, kw_only=True)
class ServiceSettings:
    """Every setting of a served process, checked when made (``ValueError`` names the
    field). Intervals are seconds; a job whose interval is None does not run.

    Args:
        lease_ttl: Seconds a thread's run lease lives without renewal.
        lease_wait: Seconds a run or resume waits for a thread another holder drives.
        resume_due_every: The ``resume_due`` job: resumes what other processes decided
            and the ledger's due resume work (None: no watcher, ``serve --no-watch``).
        sweep_expired_every: The ``sweep_expired`` job: resolves overdue requests
            ``expired`` and resumes their runs (off by default).
        orphans_every: The ``orphans`` job: cancels the pending requests their thread no
            longer waits on (off with the watcher, ``serve --no-watch``).
        inbox_every: The ``inbox`` job: lists the pending approvals, at the start and
            then at this interval, so a snapshot finds their rows checked already
            (None: the first snapshot after a start checks them).
        deliveries_every: The ``deliveries`` job: sends the due webhook deliveries (runs
            only with ``webhooks``).
        follow_ups_every: The ``follow_ups`` job: runs the due reminders, escalations
            and requester notices (runs only when the ledger's plan asks for them).
        retention: What the ``retention`` job keeps (None: no retention).
        retention_every: How often the ``retention`` job compacts.
        witnesses: Files or URLs the ``witness`` job publishes the audit tip to.
        witness_every: The longest time between two publications, moved or not.
        witness_poll: How often the ``witness`` job looks whether the tip moved.
        stream_poll: Seconds between two ledger reads of a quiet SSE or WebSocket stream.
        reauth_every: How often an open SSE stream or WebSocket authenticates again.
        websocket_max_age: Seconds after which any WebSocket connection is closed.
        allowed_origins: Browser origins besides the server's own that may change state.
        max_body_bytes: The largest request body or WebSocket frame read.
    """

    lease_ttl: float = DEFAULT_LEASE_TTL
    lease_wait: float = DEFAULT_LEASE_WAIT
    resume_due_every: float | None = 0.5
    sweep_expired_every: float | None = None
    orphans_every: float | None = 30.0
    inbox_every: float | None = 60.0
    deliveries_every: float | None = 0.5
    follow_ups_every: float | None = 1.0
    retention: RetentionPolicy | None = None
    retention_every: float = 3600.0
    witnesses: tuple[str, ...] = ()
    witness_every: float = 300.0
    witness_poll: float = 2.0
    stream_poll: float = 0.2
    reauth_every: float = 15.0
    websocket_max_age: float | None = None
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        for name in (
            "lease_ttl",
            "retention_every",
            "witness_every",
            "witness_poll",
            "stream_poll",
            "reauth_every",
        ):
            _check_seconds(name, getattr(self, name))
        _check_seconds("lease_wait", self.lease_wait, zero=True)
        for name in (
            "resume_due_every",
            "sweep_expired_every",
            "orphans_every",
            "inbox_every",
            "deliveries_every",
            "follow_ups_every",
            "websocket_max_age",
        ):
            if getattr(self, name) is not None:
                _check_seconds(name, getattr(self, name))
        if self.retention is not None and not isinstance(self.retention, RetentionPolicy):
            raise ValueError("retention: expected a RetentionPolicy or None")
        witnesses = _strings("witnesses", self.witnesses)
        object.__setattr__(self, "witnesses", tuple(witnesses))
        origins = _strings("allowed_origins", self.allowed_origins)
        object.__setattr__(self, "allowed_origins", frozenset(origins))
        size = self.max_body_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError("max_body_bytes: must be a positive number of bytes")


def _check_seconds(name: str, value: object, *, zero: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        least = "0 or more" if zero else "positive"
        raise ValueError(f"{name}: must be a finite number of seconds, {least}")


def _strings(name: str, values: object) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Collection):
        raise ValueError(f"{name}: expected a collection of strings")
    if not all(isinstance(value, str) and value for value in values):
        raise ValueError(f"{name}: every item must be a non-empty string")
    return sorted(values) if isinstance(values, (set, frozenset)) else list(values)


class ApprovalService:
    """One served graph: its one driver, its periodic jobs and its lifespan.

    Args:
        graph: The compiled graph, or a ``StateGraph`` builder when ``checkpointer`` is
            given (``None``: a service that records decisions but resumes nothing).
        authority: The approval authority whose ledger the graph's gates write.
        settings: Every setting of the served process (the defaults when None).
        config: The base config of every run the service drives (the authority and
            "gates accept only recorded resolutions" are always added).
        checkpointer: Where the graph's checkpoints go: a checkpointer, or an async
            context manager that opens one (``AsyncSqliteSaver.from_conn_string(path)``),
            entered by :meth:`lifespan`, which then serves once. None: the graph's own.
        page_tools: The graph's :class:`~aais_langgraph.tools.PageToolGate`.
        webhooks: Subscriptions, or a :class:`~aais_langgraph.webhooks.WebhookWorker`
            of ``authority`` (needs the ``notify`` extra): the ledger records their
            deliveries with each request and resolution, and the ``deliveries`` job
            sends them while the service serves (every ``deliveries_every`` seconds; a
            given worker is closed when the service stops).
        slack: The ``[[slack]]`` channels and ``[slack_users]`` of the access policy
            (:class:`~aais_langgraph.webhooks.SlackApp`, needs the ``slack`` extra): their
            messages are deliveries like the webhooks' (the ledger's plan must include
            ``slack.subscriptions``), and ``create_app`` serves ``POST /slack/interactions``
            for their buttons.
    """

    def __init__(
        self,
        graph: Any,
        authority: ApprovalAuthority,
        *,
        settings: ServiceSettings | None = None,
        config: Mapping[str, Any] | None = None,
        checkpointer: Any = None,
        page_tools: PageToolGate | None = None,
        webhooks: Iterable[WebhookSubscription] | WebhookWorker | None = None,
        slack: SlackApp | None = None,
    ) -> None:
        if settings is not None and not isinstance(settings, ServiceSettings):
            raise TypeError("settings: expected ServiceSettings")
        self.authority = authority
        self.settings = settings if settings is not None else ServiceSettings()
        self.config = config
        self.page_tools = page_tools
        self._opener: Any = None
        self._entered = False
        self._upkeep: LedgerUpkeep | None = None
        self._graph = graph
        if opens_checkpointer(checkpointer):
            check_takes_checkpointer(graph)  # now, not when the service starts
            self._opener = checkpointer
        elif checkpointer is not None:
            self._graph = served_graph(graph, checkpointer)
        refuse_other_ledgers(graph, authority)  # its gates' requests would reach nobody
        self.slack = slack
        """The Slack app channels and users (None: no Slack)."""
        self._worker, self._subscriptions = _webhooks_of(authority, webhooks, slack)
        if self._subscriptions and authority.ledger.delivery_plan is None:
            field_name = "webhooks" if webhooks is not None else "slack"
            raise ValueError(
                f"{field_name}: the authority's ledger records no deliveries; open it with "
                "delivery_plan=SubscriptionPlan([*subscriptions, *slack.subscriptions])"
            )
        self._driver: ThreadDriver | None = None
        self._watcher: DecisionWatcher | None = None
        self._resumes: BackgroundResumes | None = None
        self._inbox_listed: asyncio.Event | None = None
        """Set once the ``inbox`` job's first pass of this lifespan ended (None: no job)."""
        self.scheduler: Scheduler | None = None
        """The jobs running while the service serves (None outside :meth:`lifespan`)."""

    @property
    def opens_checkpointer(self) -> bool:
        """True when the graph is known only once :meth:`lifespan` opened the checkpointer."""
        return self._opener is not None and not self._entered

    @property
    def graph(self) -> Any:
        """The graph as served (compiled with its checkpointer)."""
        if self.opens_checkpointer:
            raise RuntimeError(
                "graph: served once lifespan() opened the checkpointer; use the service inside it"
            )
        return self._graph

    @property
    def driver(self) -> ThreadDriver:
        """The one driver of every thread this service drives from outside a run."""
        if self._driver is None:
            self._driver = ThreadDriver(
                self.graph,
                self.authority,
                config=self.config,
                lease_ttl=self.settings.lease_ttl,
                lease_wait=self.settings.lease_wait,
                served=True,
            )
        return self._driver

    @property
    def watcher(self) -> DecisionWatcher:
        """The state of the ``resume_due`` and ``orphans`` jobs."""
        if self._watcher is None:
            self._watcher = DecisionWatcher(self.driver)
        return self._watcher

    @property
    def resumes(self) -> BackgroundResumes:
        """The background resumes of what the presenter endpoints record."""
        if self._resumes is None:
            self._resumes = BackgroundResumes(self.driver)
        return self._resumes

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[ApprovalService]:
        """Serve for the duration of the block: open the checkpointer (when given one to
        open), then run the periodic jobs; stop them, and close it, at the end."""
        async with AsyncExitStack() as stack:
            if self._opener is not None:
                if self._entered:
                    raise RuntimeError(
                        "checkpointer: its context manager was entered already; a service "
                        "(or app) built with one serves once (build it again to serve again)"
                    )
                self._entered = True
                saver = await stack.enter_async_context(self._opener)
                self._graph = served_graph(self._graph, saver)
            jobs = self._jobs(stack)
            if self._upkeep is not None:
                await self._upkeep.check_witnesses()  # before anything resumes
            listing = any(job.name == "inbox" for job in jobs)
            self._inbox_listed = asyncio.Event() if listing else None
            if self._watcher is not None:
                stack.push_async_callback(self._watcher.stop)
            self.scheduler = Scheduler(jobs)
            await stack.enter_async_context(self.scheduler.running())
            try:
                yield self
            finally:
                self.scheduler = None
                self._inbox_listed = None

    def _jobs(self, stack: AsyncExitStack) -> list[PeriodicJob]:
        """The periodic jobs the settings switch on, in the order of the table above."""
        settings = self.settings
        jobs: list[PeriodicJob] = []
        if self._graph is not None:
            if settings.resume_due_every is not None:
                jobs.append(
                    PeriodicJob("resume_due", settings.resume_due_every, self.watcher.follow)
                )
            if settings.sweep_expired_every is not None:
                sweep = self.driver.asweep_expired
                jobs.append(PeriodicJob("sweep_expired", settings.sweep_expired_every, sweep))
            if settings.orphans_every is not None:
                orphans = self.watcher.cancel_orphans
                jobs.append(PeriodicJob("orphans", settings.orphans_every, orphans))
        if settings.inbox_every is not None:
            jobs.append(PeriodicJob("inbox", settings.inbox_every, self._list_inbox))
        plan = self.authority.ledger.delivery_plan
        follows_up = bool(getattr(plan, "follows_up", False))
        if self._subscriptions and settings.deliveries_every is not None:
            worker = self._worker or _new_worker(self.authority, self._subscriptions, follows_up)
            stack.callback(worker.close)
            jobs.append(PeriodicJob("deliveries", settings.deliveries_every, worker.asend_due))
        if follows_up and settings.follow_ups_every is not None:
            from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan

            assert isinstance(plan, SubscriptionPlan)
            runner = FollowUpRunner(self.authority, plan)
            jobs.append(PeriodicJob("follow_ups", settings.follow_ups_every, runner.arun_due))
        if settings.retention is not None or settings.witnesses:
            upkeep = LedgerUpkeep(
                self.authority.ledger,
                settings,
                key=self.authority.key,
                on_contradiction=self.authority.refuse_history,
            )
            self._upkeep = upkeep
            if settings.retention is not None:
                retention = upkeep.retention_pass
                jobs.append(PeriodicJob("retention", settings.retention_every, retention))
            if settings.witnesses:
                jobs.append(PeriodicJob("witness", settings.witness_poll, upkeep.witness_pass))
        return jobs

    async def snapshot(self, viewer: Principal | None = None) -> ApprovalSnapshot:
        """``approval.snapshot`` of what waits that ``viewer`` may see (None: everything),
        as the presenter routes serve it: pending requests whose run still waits for
        them (:func:`~aais_langgraph.threads.apending_approvals`, not reconciled).
        While the ``inbox`` job's first pass works, it waits for that pass instead of
        checking the same rows beside it."""
        listed = self._inbox_listed
        if listed is not None:
            await listed.wait()
        return await apending_approvals(self.authority, self.graph, reconcile=False, viewer=viewer)

    async def _list_inbox(self) -> None:
        """One pass of the ``inbox`` job: the snapshot of everything pending and its
        text, as the presenter routes list and write them (what it vouches for, and
        each request's text, is remembered for them)."""
        try:
            snapshot = await apending_approvals(self.authority, self._graph, reconcile=False)
            await asyncio.to_thread(envelope_text, snapshot)
        finally:
            if self._inbox_listed is not None:
                self._inbox_listed.set()


def _webhooks_of(
    authority: ApprovalAuthority,
    webhooks: Iterable[WebhookSubscription] | WebhookWorker | None,
    slack: SlackApp | None,
) -> tuple[WebhookWorker | None, list[WebhookSubscription | SlackChannel]]:
    """The worker given (or None) and what it sends for; ValueError names a worker that
    sends for another authority, or not for the Slack channels."""
    channels: list[WebhookSubscription | SlackChannel] = []
    if slack is not None:
        from aais_langgraph.webhooks import SlackApp

        if not isinstance(slack, SlackApp):
            raise TypeError("slack: expected a SlackApp")
        channels = list(slack.channels)
    if webhooks is None:
        return None, channels
    from aais_langgraph.webhooks import WebhookWorker

    if isinstance(webhooks, WebhookWorker):
        if webhooks.authority is not authority:
            raise ValueError("webhooks: the worker must send for the service's authority")
        if any(webhooks.slack.get(item.name) is not item for item in channels):
            raise ValueError("slack: the worker given must send for the Slack channels too")
        return webhooks, [*webhooks.subscriptions.values()]
    return None, [*webhooks, *channels]


def _new_worker(
    authority: ApprovalAuthority,
    subscriptions: list[WebhookSubscription | SlackChannel],
    follows_up: bool,
) -> WebhookWorker:
    """The service's sender; by the authority's clock when follow-ups run (they record
    deliveries due by that clock)."""
    from aais_langgraph.webhooks import WebhookWorker

    if not follows_up:
        return WebhookWorker(authority, subscriptions)
    return WebhookWorker(authority, subscriptions, clock=lambda: authority.clock().timestamp())
