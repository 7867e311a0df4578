"""An AG-UI agent for LangGraph graphs whose interrupts are AAIS approvals.

Built on ag-ui-langgraph's ``LangGraphAgent`` (``>=0.0.47,<0.1``; seams read on 0.0.47),
and a drop-in for it: every stock constructor flag is taken, with stock's defaults but
``emit_interrupt_outcome=True``, and ``clone`` keeps a subclass's signature as stock's
does. CI runs ag-ui-langgraph's own test suite against this class
(``scripts/ci_agui_upstream.py``; the differences are listed in
``tests/agui/upstream_differences.txt``). Private seams are overridden, each in a few
lines, and ``tests/agui/test_agent_seams.py`` fails loudly if an upgrade moves them (CI
runs it against the newest release too, ``scripts/ci_newest_agui.sh``):

- ``_interrupts_to_agui``: an ``approval.requested`` interrupt value becomes an
  interrupt with ``metadata.aais`` (see :mod:`aais_agui.mapping`);
- ``_build_command_from_agui_resume``: returns the id-keyed resume map planned
  in :meth:`AAISLangGraphAgent.run` under the thread's run lease; outside a planned run
  it is stock's for plain interrupts and refuses anything that answers an approval;
- ``_emit_interrupt_finish``: no legacy ``on_interrupt`` event for an approval, which is
  offered in the interrupt outcome whatever ``emit_interrupt_outcome`` says;
- ``_handle_stream_events``: an AAIS refusal raised inside the run ends it with
  ``RUN_ERROR`` carrying its code (:func:`~aais_agui.run_outcomes.run_error_for`);
- ``get_schema_keys``: worked out once per compiled graph, not on every run (it
  builds the graph's JSON Schemas: about 25 ms for a graph with ``messages``).

Everything else (streaming, snapshots, ``runtime.context``, re-emitting pending
interrupts on a run without ``resume``) is ag-ui-langgraph's, but for two AG-UI 1.0
outcome details (:mod:`.run_outcomes`): ``cancelled`` when a resume only cancelled, and
``subagentRunId`` on approvals raised inside subgraphs.

One way in: every answer reaches the graph through :func:`~aais_agui.resume_plan.plan_resume`
under the authenticated actor. ``forwardedProps`` that would steer the graph
around it (ag-ui-langgraph's legacy ``command`` resume, ``nodeName``'s state write
as if a node had run) are refused with ``RUN_ERROR`` before anything is read or
recorded, and the graph runs with ``configurable[RECORDED_ONLY_KEY]`` set, so its
gates accept only resolutions the authority already recorded, and the decisions the
planner authorized and handed to this run (``configurable[AUTHORIZED_ANSWERS_KEY]``),
which each gate records with its execution claim in one ledger write.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from ag_ui_langgraph import LangGraphAgent, LangGraphEventTypes
from ag_ui_langgraph.utils import camel_to_snake
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from pydantic import PydanticUserError
from typing_extensions import Self

from aais_langgraph.authority import (
    FORBIDDEN,
    ApprovalAuthority,
    ForbiddenError,
    LeaseHeldError,
    Principal,
    RequestLimitError,
    ThreadAccess,
    checked_principal,
)
from aais_langgraph.gate import AUTHORIZED_ANSWERS_KEY, REQUESTER_KEY, AuthorizedAnswers
from aais_langgraph.protocol import AAISValidationError, Actor, ApprovalRequested, Refusal
from aais_langgraph.threads import LeasedThread, ThreadDriver, ThreadView
from aais_langgraph.tools import PageBinding, PageToolGate

from .frontend_tools import arelay_for, held, page_binding, plan_page_resume, with_page
from .local_runs import local_runs
from .mapping import carries_aais, is_approval_request, request_to_interrupt
from .reoffer import reoffer_events
from .resume_plan import UNAUTHENTICATED_ANSWER, ResumeRejected, plan_resume, served_config
from .run_outcomes import (
    aattribute_interrupts,
    acancel_watch,
    refusal_event,
    run_error_for,
    settle_outcome,
)
from .service import ApprovalService, ServiceSettings
from .state_keys import graph_schema_keys
from .thread_views import ThreadEventFilter
from .vouched_actor import claim_vouched_actor

logger = logging.getLogger(__name__)

#: ag-ui-langgraph's schema keys of each compiled graph served (they depend on the graph only).
_SCHEMA_KEYS: weakref.WeakKeyDictionary[Any, dict[str, list[str]]] = weakref.WeakKeyDictionary()


class AAISLangGraphAgent(LangGraphAgent):  # type: ignore[misc]  # ag-ui-langgraph is untyped
    """Serve a compiled LangGraph graph over AG-UI with AAIS approvals as interrupts.

    ``authority`` judges every decision; it also reaches the graph's gates
    through ``configurable["aais_authority"]``. Each run holds the thread's run
    lease, so two presenters can never drive one paused thread at once. Runs go
    through the driver of :attr:`service` (given, or built once here; every
    :meth:`clone` shares it). Set
    :attr:`actor` (the authenticated actor, see :meth:`with_actor`) before a run
    that answers approvals: a resume without one is refused.
    """

    emit_interrupt_outcome: bool
    """ag-ui-langgraph's flag, for plain interrupts (an approval is always in the outcome)."""

    config: dict[str, Any]
    """The run config (ag-ui-langgraph's): the authority and the requester in ``configurable``."""

    def __init__(
        self,
        *,
        name: str,
        graph: Any = None,
        authority: ApprovalAuthority | None = None,
        description: str | None = None,
        config: Mapping[str, Any] | None = None,
        enable_legacy_on_interrupt_event: bool = True,
        emit_interrupt_outcome: bool = True,
        emit_raw_events: bool = True,
        emit_subagent_events: bool | None = None,
        subagent_visibility: str | None = None,
        page_tools: PageToolGate | None = None,
        settings: ServiceSettings | None = None,
        service: ApprovalService | None = None,
    ) -> None:
        """Serve ``graph`` as the AG-UI agent ``name``.

        Args:
            name: the agent's name (ag-ui-langgraph's).
            graph: the compiled LangGraph graph, with a checkpointer (default: the
                service's).
            authority: the approval authority that judges every decision (default: the
                service's).
            description: the agent's description (ag-ui-langgraph's).
            config: the run config; the authority is added to its ``configurable``.
            enable_legacy_on_interrupt_event: the legacy ``on_interrupt`` CUSTOM event, as
                ag-ui-langgraph sends it, for interrupts that are not AAIS approvals (an
                approval is offered in the run's interrupt outcome only).
            emit_interrupt_outcome: ``RUN_FINISHED``'s interrupt outcome, as ag-ui-langgraph
                sends it, for interrupts that are not AAIS approvals; an approval is always
                offered there (it is answered with ``RunAgentInput.resume``). True by
                default: with False, plain interrupts are offered only through the legacy
                event, whose ``forwardedProps.command`` answer is refused here.
            emit_raw_events: RAW events and ``raw_event`` copies, as ag-ui-langgraph.
            emit_subagent_events: ag-ui-langgraph's alias of ``subagent_visibility``.
            subagent_visibility: ``"inline"``, ``"attributed"`` or ``"hidden"``, as
                ag-ui-langgraph.
            page_tools: the graph's page tool gate: the model's calls of the frontend tools
                it gates reach the client only once approved (:mod:`.frontend_tools`;
                default: the service's).
            settings: the served process's settings (its lease settings reach every
                run), for the service built here; a given service holds its own.
            service: the :class:`~aais_agui.service.ApprovalService` whose driver runs
                go through (``create_app`` passes its own); without one, one is built
                from ``graph``, ``authority``, ``config``, ``page_tools`` and ``settings``.
        """
        service = _service_for(graph, authority, config, page_tools, settings, service)
        graph, authority = service.graph, service.authority
        config = service.config if config is None else config
        page_tools = service.page_tools if page_tools is None else page_tools
        super().__init__(
            name=name,
            graph=graph,
            description=description,
            config=served_config(config, authority),
            enable_legacy_on_interrupt_event=enable_legacy_on_interrupt_event,
            emit_interrupt_outcome=emit_interrupt_outcome,
            emit_raw_events=emit_raw_events,
            emit_subagent_events=emit_subagent_events,
            subagent_visibility=subagent_visibility,
        )
        self.service = service
        self.authority = authority
        self.actor: Principal | Actor | Mapping[str, Any] | None = None
        self._planned_resume: dict[str, Any] | None = None
        self._mapped: dict[str, tuple[Any, Interrupt]] = {}
        self.page_tools = page_tools
        self.page_origin: str | None = None
        """The page origin of this agent's runs (the request's ``Origin`` header)."""

    @property
    def driver(self) -> ThreadDriver:
        """The service's one driver: every run of this agent and its clones holds its
        thread's lease through it."""
        return self.service.driver

    def clone(self) -> Self:
        """A fresh agent with the same settings and actor (one per request).

        Like ag-ui-langgraph's, it keeps a subclass's signature: a setting the subclass's
        ``__init__`` does not take is left out while it holds its default (the subclass
        sets it), and raises TypeError naming it otherwise. The twin shares this agent's
        service (and so its driver) whatever the subclass takes.
        """
        settings: dict[str, tuple[Any, Any]] = {
            "authority": (self.authority, _REQUIRED),
            "enable_legacy_on_interrupt_event": (self.enable_legacy_on_interrupt_event, True),
            "emit_raw_events": (self.emit_raw_events, True),
            "emit_interrupt_outcome": (self.emit_interrupt_outcome, True),
            "page_tools": (self.page_tools, None),
        }
        if self.subagent_visibility == "hidden":
            settings["subagent_visibility"] = (self.subagent_visibility, "inline")
        else:
            settings["emit_subagent_events"] = (self.emit_subagent_events, False)
        accepts = _keyword_parameters(type(self).__init__)
        kwargs: dict[str, Any] = {
            "name": self.name,
            "graph": self.graph,
            "description": self.description,
            "config": self.config,
        }
        shared = self.graph is self.service.graph and self.authority is self.service.authority
        if shared and (accepts is None or "service" in accepts):
            kwargs["service"] = self.service
        for key, (value, default) in settings.items():
            if accepts is None or key in accepts:
                kwargs[key] = value
            elif default is not _REQUIRED and value != default:
                raise TypeError(
                    f"{type(self).__name__}.__init__ does not accept {key!r}, which this "
                    "agent sets; accept it or override clone()"
                )
        try:
            twin = type(self)(**kwargs)
        except TypeError as error:
            raise TypeError(
                f"{type(self).__name__} must override clone() or let its __init__ take "
                "name, graph, description, config and authority by keyword"
            ) from error
        if shared:  # a subclass that takes no service built an idle one
            twin.service = self.service
        twin.actor = self.actor
        twin.page_origin = self.page_origin
        vouched = claim_vouched_actor()  # the stock endpoint's dependency authenticated it
        if vouched is not None:
            twin._act_as(vouched.principal)
            twin.page_origin = vouched.origin
        return twin

    def with_actor(self, actor: Principal | Actor | Mapping[str, Any] | None) -> Self:
        """A clone that answers approvals as ``actor`` (the authenticated one), and whose
        runs ask for approvals on their behalf (``configurable["aais_requester"]``: held
        to the authority's :class:`~aais_langgraph.authority.RequestLimits`)."""
        twin = self.clone()
        twin._act_as(actor)
        return twin

    def _act_as(self, actor: Principal | Actor | Mapping[str, Any] | None) -> None:
        self.actor = actor
        requester = actor.id if isinstance(actor, (Actor, Principal)) else (actor or {}).get("id")
        requester = requester if isinstance(requester, str) else None
        if requester is not None:
            configurable = {**self.config["configurable"], REQUESTER_KEY: requester}
            self.config = {**self.config, "configurable": configurable}

    def get_capabilities(self) -> dict[str, Any]:
        """ag-ui-langgraph's declaration, with AAIS interrupts and no edited arguments."""
        capabilities: dict[str, Any] = dict(super().get_capabilities())
        capabilities["humanInTheLoop"] = {
            "supported": True,
            "approvals": True,
            "interrupts": True,
            "approveWithEdits": False,
        }
        return capabilities

    async def run(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        """Run or resume one thread under its run lease; a refused resume is ``RUN_ERROR``,
        followed by a run that offers the still-open interrupts again (:mod:`.reoffer`)."""
        self._planned_resume = None
        self._mapped = {}
        self.config = _handing(self.config, None)  # what an earlier run was handed is gone
        steering = steering_props(input.forwarded_props)
        if steering:
            for event in _refusal(
                input,
                "aais.forwarded_props_refused",
                "forwardedProps may not steer the graph: "
                + ", ".join(f"/forwardedProps/{key}" for key in steering)
                + " (answer approvals with RunAgentInput.resume)",
            ):
                yield event
            return
        principal = checked_principal(self.actor)
        access = await self.authority.access.athread_access(principal, input.thread_id)
        if principal is None and access.record is not None:
            # A run with no actor (an endpoint that authenticates nobody) may start
            # threads of its own, never read or continue one a person started.
            for event in _refusal(input, "aais.unauthenticated", UNAUTHENTICATED_ANSWER):
                yield event
            return
        if not access.visible:
            # Another person's thread: no byte of it (messages, interrupts) is sent.
            for event in _refusal(input, FORBIDDEN, THREAD_REFUSED):
                yield event
            return
        if self.page_tools is not None:
            try:
                page = page_binding(input, origin=self.page_origin, gate=self.page_tools)
            except AAISValidationError as error:  # tools that are not I-JSON: no revision
                for event in _refusal(input, "aais.invalid_tools", str(error)):
                    yield event
                return
            self.config = with_page(self.config, page)
        try:
            # The driver's lease and view; ag-ui-langgraph's run (which streams) invokes the
            # graph with the planned map through _build_command_from_agui_resume.
            config = {"configurable": {**self.config["configurable"], "thread_id": input.thread_id}}
            async with (
                local_runs(self.authority.ledger).driving(input.thread_id),
                self.driver.aleased(config) as thread,
            ):
                watch = None
                view = await thread.aview()
                if principal is not None:
                    sent = await self._sender(principal, input, view, config, access)
                    if sent is None:  # a reconnect by someone who may not post: nothing runs
                        visible = ThreadEventFilter(access, self.authority, principal)
                        for event in await self._after_recorded(input, config):
                            shown = await visible.afilter(
                                await aattribute_interrupts(event, self.authority)
                            )
                            if shown is not None:
                                yield shown
                        return
                    sender, access = sent
                    if sender is not None or input.resume:
                        # The run acts for who sent it: the author of the message it runs,
                        # or of the one whose run an answer continues (nobody known: no one,
                        # never the person answering).
                        current: Any = self.config
                        configurable = {
                            key: value
                            for key, value in current["configurable"].items()
                            if key != REQUESTER_KEY
                        }
                        if sender is not None:
                            configurable[REQUESTER_KEY] = sender
                        self.config = {**current, "configurable": configurable}
                        config = {"configurable": {**configurable, "thread_id": input.thread_id}}
                        thread = replace(thread, config=self.driver.run_config(config))
                visible = ThreadEventFilter(access, self.authority, principal)
                relay = await arelay_for(self.page_tools, self.graph, self.authority, config)
                if input.resume:
                    watch = await acancel_watch(
                        self.graph,
                        self.authority,
                        config,
                        view.open,
                        input.resume,
                        protocol_version=input.protocol_version,
                    )
                    handed = AuthorizedAnswers()
                    pending = self._validated_open(view.open)
                    self._planned_resume = await self._plan(pending, input.resume, handed)
                    if handed:
                        self.config = _handing(self.config, handed)
                elif view.interrupts and await self._resume_recorded(config, thread):
                    # Answered elsewhere and not resumed yet (a crash, a busy lease): resumed
                    # with the recorded answers instead of offering them again.
                    async for event in held(relay, await self._after_recorded(input, config)):
                        shown = await visible.afilter(
                            await aattribute_interrupts(event, self.authority)
                        )
                        if shown is not None:
                            yield shown
                    return
                streamed = held(relay, super().run(input))
                async for event in settle_outcome(streamed, watch, self.graph, config):
                    shown = await visible.afilter(
                        await aattribute_interrupts(event, self.authority)
                    )
                    if shown is not None:
                        yield shown
                if self._planned_resume:
                    thread.finish(view, self._planned_resume)
                elif view.interrupts:
                    # A new run on a paused thread (an edited or regenerated message forks
                    # it) may leave requests behind that nothing will answer (SPEC §11).
                    await self.driver.acancel_orphans(thread_id=input.thread_id)
        except ResumeRejected as rejected:
            for event in _refusal(input, rejected.code, rejected.message):
                yield event
            if rejected.code == "aais.expired":
                # The expiry was recorded: continue the thread past it now (its resume
                # work would, later), then offer what it waits for next.
                try:
                    async with local_runs(self.authority.ledger).driving(input.thread_id):
                        await self.driver.aresume_resolved(input.thread_id, lease_wait=0)
                except LeaseHeldError:
                    logger.info("an expired request's thread is busy; its resume work stays due")
            visible = ThreadEventFilter(access, self.authority, principal)
            for event in await reoffer_events(
                self.graph,
                self.authority,
                thread_id=input.thread_id,
                code=rejected.code,
                configurable=self.config["configurable"],
                to_agui=self._interrupts_to_agui,
            ):
                shown = await visible.afilter(await aattribute_interrupts(event, self.authority))
                if shown is not None:
                    yield shown
        except LeaseHeldError:
            for event in _refusal(
                input, "aais.thread_busy", "another run is driving this thread; retry shortly"
            ):
                yield event
        except _PostRefused:
            for event in _refusal(input, FORBIDDEN, THREAD_REFUSED):
                yield event
        except (RequestLimitError, ForbiddenError) as error:
            # Raised by a resume with recorded answers, outside ag-ui-langgraph's run.
            refused = run_error_for(error)
            if refused is None:
                raise
            yield RunStartedEvent(
                type=EventType.RUN_STARTED, thread_id=input.thread_id, run_id=input.run_id
            )
            yield refused

    async def _sender(
        self,
        principal: Principal,
        input: RunAgentInput,
        view: ThreadView,
        config: Mapping[str, Any],
        access: ThreadAccess,
    ) -> tuple[str | None, ThreadAccess] | None:
        """Who the run acts for, and the viewer's access after their post; None for a
        reconnect by someone who may see the thread but not post to it (it is served
        from the checkpoint, running nothing). Raises :class:`ForbiddenError` for a post
        they may not make, before anything is recorded or run.

        An answer (``resume``) continues the run of whoever sent it. A reconnect (the
        thread is paused and the run brings no message it does not hold) runs nothing
        and changes no one. Any other run posts to the thread: its sender must be
        allowed to ``start`` (a new thread) or ``post``, and the thread's runs act for
        them from then on."""
        record = access.record
        if input.resume:
            return (None if record is None else record.sender), access
        if view.open and not await self._adds_message(input, config):
            try:
                await self.authority.access.apost_to_thread(
                    principal, input.thread_id, exists=True, record=False
                )
            except ForbiddenError:
                return None  # they may see it, not post to it: served from the checkpoint
            return (None if record is None else record.sender), access
        checks = self.authority.access
        exists = view.known or bool(view.open)

        def post() -> tuple[str | None, ThreadAccess] | None:
            # The post and the access it leaves, in one hop off the event loop.
            posted = checks.post_to_thread(principal, input.thread_id, exists=exists)
            if posted is None:
                return None
            return posted.sender, checks.thread_access(principal, input.thread_id)

        try:
            after = await asyncio.to_thread(post)
        except ForbiddenError:
            raise _PostRefused() from None
        return (None, access) if after is None else after

    async def _adds_message(self, input: RunAgentInput, config: Mapping[str, Any]) -> bool:
        """Whether ``input`` brings a message the thread does not hold yet (a new or edited
        user message, or any message of a thread without them): on a paused thread, what
        makes a run more than a reconnect (ag-ui-langgraph then regenerates or continues)."""
        sent = [m for m in input.messages or () if m.role not in ("tool", "system")]
        if not sent:
            return False
        state = await self.graph.aget_state({"configurable": dict(config["configurable"])})
        values = state.values if isinstance(state.values, Mapping) else {}
        held = {getattr(m, "id", None): m for m in values.get("messages") or ()}
        for message in sent:
            known = held.get(message.id)
            if known is None:
                return True
            if message.role == "user" and _text_of(message.content) != _text_of(known.content):
                return True
        return False

    async def _resume_recorded(self, config: Mapping[str, Any], thread: LeasedThread) -> bool:
        """Resume the held thread with the answers already recorded for it (the driver's
        recorded plan); False when there were none."""
        resumed = await self.driver.adrive(config, self.driver.recorded_plan(), thread=thread)
        return bool(resumed)

    async def _after_recorded(
        self, input: RunAgentInput, config: Mapping[str, Any]
    ) -> list[BaseEvent]:
        """The run that reports a thread resumed with recorded answers: its interrupts
        still open, or a plain finish."""
        run_id = input.run_id
        state = await self.graph.aget_state(config)
        pending = [item for task in state.tasks or () for item in task.interrupts or ()]
        outcome = (
            RunFinishedInterruptOutcome(
                type="interrupt", interrupts=self._interrupts_to_agui(pending)
            )
            if pending
            else None
        )
        return [
            RunStartedEvent(type=EventType.RUN_STARTED, thread_id=input.thread_id, run_id=run_id),
            RunFinishedEvent(
                type=EventType.RUN_FINISHED,
                thread_id=input.thread_id,
                run_id=run_id,
                outcome=outcome,
            ),
        ]

    def _validated_open(self, pending: Mapping[str, Any]) -> dict[str, Any]:
        """The thread's open interrupt values, each approval request validated once for the
        whole answering run: the planner judges its model, and ag-ui-langgraph's mapping
        of the open interrupts (it hands them to ``_build_command_from_agui_resume``)
        reuses its interrupt. A value that does not validate stays as it is, for the
        planner to refuse as it always has."""
        validated: dict[str, Any] = {}
        for interrupt_id, value in pending.items():
            if is_approval_request(value):
                try:
                    requested = ApprovalRequested.from_data(value)
                    mapped = request_to_interrupt(requested, interrupt_id=interrupt_id)
                except AAISValidationError:
                    validated[interrupt_id] = value
                    continue
                self._mapped[interrupt_id] = (value, mapped)
                value = requested
            validated[interrupt_id] = value
        return validated

    async def _plan(
        self, pending: Mapping[str, Any], entries: list[ResumeEntry], handed: AuthorizedAnswers
    ) -> dict[str, Any]:
        try:
            return await asyncio.to_thread(
                plan_page_resume,
                self.authority,
                pending,
                entries,
                actor=self.actor,
                page=PageBinding.from_config(self.config),
                plan=functools.partial(plan_resume, handed=handed),
            )
        except ResumeRejected:
            raise
        except AAISValidationError as error:
            raise ResumeRejected("aais.invalid_resume", str(error)) from None
        except Exception:
            logger.exception("planning a resume failed")
            raise ResumeRejected(
                "aais.internal", "the resume could not be planned; see the server log"
            ) from None

    # -- ag-ui-langgraph seams (kept small; see tests/agui/test_agent_seams.py) ---------

    def _interrupts_to_agui(self, lg_interrupts: list[Any]) -> list[Interrupt]:
        mapped: list[Interrupt] = []
        for raw in lg_interrupts:
            if is_approval_request(raw.value):
                mapped.append(self._approval_interrupt(raw))
            else:
                mapped.extend(super()._interrupts_to_agui([raw]))
        return mapped

    def _approval_interrupt(self, raw: Any) -> Interrupt:
        # ag-ui-langgraph maps a run's interrupts more than once (its reconciliation and
        # its tail, and an answering run's open interrupts, which the planner validated
        # already: read from the checkpoint again under the same lease, so equal); the
        # envelope is validated and its response schema built once per run, and each
        # caller gets its own copy (ag-ui-langgraph sets fields on them).
        found = self._mapped.get(raw.id)
        if found is None or not _identical(found[0], raw.value):
            found = (raw.value, request_to_interrupt(raw.value, interrupt_id=raw.id))
            self._mapped[raw.id] = found
        return found[1].model_copy()

    def _build_command_from_agui_resume(
        self, entries: list[ResumeEntry], *, open_interrupts: list[Interrupt] | None = None
    ) -> Command[Any]:
        if self._planned_resume is not None:
            return Command(resume=dict(self._planned_resume))
        # Outside a planned run: answers to plain interrupts are ag-ui-langgraph's; an
        # approval is answered only through the planner, under the lease and the actor.
        if any(carries_aais(item) for item in [*entries, *(open_interrupts or ())]):
            raise RuntimeError(
                "an approval was answered outside a planned run; answer it through "
                "AAISLangGraphAgent.run"
            )
        stock: Command[Any] = super()._build_command_from_agui_resume(
            entries, open_interrupts=open_interrupts
        )
        return stock

    def get_schema_keys(self, config: Any) -> dict[str, list[str]]:
        # ag-ui-langgraph builds the input, output and config JSON Schemas on every run to
        # list their keys; for a compiled StateGraph they depend on the graph alone.
        if not isinstance(self.graph, CompiledStateGraph):
            return dict(super().get_schema_keys(config))
        keys = _SCHEMA_KEYS.get(self.graph)
        if keys is None:
            try:
                listed = super().get_schema_keys(config)
            except PydanticUserError:  # a typing.TypedDict state before Python 3.12, ...
                listed = graph_schema_keys(self.graph, self.constant_schema_keys)
            keys = {name: list(found) for name, found in listed.items()}
            _SCHEMA_KEYS[self.graph] = keys
        return {name: list(found) for name, found in keys.items()}

    def _emit_interrupt_finish(
        self, *, thread_id: str, run_id: str, lg_interrupts: list[Any]
    ) -> list[BaseEvent]:
        # ag-ui-langgraph's tail, without the legacy on_interrupt CUSTOM event for an AAIS
        # approval: the approval is offered once, in the interrupt outcome, and answered
        # through RunAgentInput.resume (a client acting on the event would answer through
        # the refused forwardedProps.command).
        chosen: bool = self.emit_interrupt_outcome
        # An approval is always offered in the outcome, whatever the flag says for plain
        # interrupts. The flag is ag-ui-langgraph's to read; this call never awaits, so no
        # other run sees it changed.
        self.emit_interrupt_outcome = chosen or any(
            is_approval_request(getattr(raw, "value", None)) for raw in lg_interrupts
        )
        try:
            events: list[BaseEvent] = super()._emit_interrupt_finish(
                thread_id=thread_id, run_id=run_id, lg_interrupts=lg_interrupts
            )
        finally:
            self.emit_interrupt_outcome = chosen
        return [event for event in events if not _is_legacy_approval_event(event)]

    async def _handle_stream_events(self, input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        # ag-ui-langgraph turns an exception of the run into RUN_ERROR without a code; an
        # AAIS refusal inside the run (a request over a limit, a forbidden step) keeps its.
        started = False
        try:
            async for event in super()._handle_stream_events(input):
                started = started or getattr(event, "type", None) == EventType.RUN_STARTED
                yield event
        except Exception as error:
            refused = run_error_for(error)
            if refused is None:
                raise
            if not started:
                yield RunStartedEvent(
                    type=EventType.RUN_STARTED, thread_id=input.thread_id, run_id=input.run_id
                )
            yield refused


#: ``forwardedProps`` keys (as ag-ui-langgraph reads them, snake_cased) that steer a run:
#: ``command`` becomes ``Command(resume=...)`` outside the planner, ``node_name`` writes the
#: client's state as if that node had run and continues after it.
STEERING_PROPS = frozenset({"command", "node_name"})


def _handing(config: Any, handed: AuthorizedAnswers | None) -> dict[str, Any]:
    """The agent's ``config`` whose next run is handed ``handed`` (None: nothing)."""
    configurable = {
        key: value
        for key, value in (config.get("configurable") or {}).items()
        if key != AUTHORIZED_ANSWERS_KEY
    }
    if handed is not None:
        configurable[AUTHORIZED_ANSWERS_KEY] = handed
    return {**config, "configurable": configurable}


def steering_props(forwarded_props: Any) -> list[str]:
    """The keys of ``forwardedProps`` that would steer the graph around the planner."""
    if not isinstance(forwarded_props, Mapping):
        return []
    return [key for key in forwarded_props if camel_to_snake(str(key)) in STEERING_PROPS]


class _PostRefused(Refusal):
    """The sender may not start or post to the thread; nothing was recorded or run."""

    code = FORBIDDEN
    pointer = ""


THREAD_REFUSED = "forbidden: you may not post to or see this thread"
"""The one refusal of a thread: the same for one nobody may start, someone else's, or one
hidden from the caller, so the message tells no one which."""


def _text_of(content: Any) -> str:
    """A message's text, for telling an edited message from the stored one."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            if isinstance(part, Mapping)
            else str(getattr(part, "text", ""))
            for part in content
        )
    return "" if content is None else str(content)


def _refusal(input: RunAgentInput, code: str, message: str) -> list[BaseEvent]:
    return [
        RunStartedEvent(type=EventType.RUN_STARTED, thread_id=input.thread_id, run_id=input.run_id),
        refusal_event(code, message),
    ]


_REQUIRED = object()
"""A setting :meth:`AAISLangGraphAgent.clone` has no default for."""


def _service_for(
    graph: Any,
    authority: ApprovalAuthority | None,
    config: Mapping[str, Any] | None,
    page_tools: PageToolGate | None,
    settings: ServiceSettings | None,
    service: ApprovalService | None,
) -> ApprovalService:
    """The agent's service: the one given (``ValueError`` names a graph, authority or
    settings it does not hold), else one built from the other arguments."""
    if service is None:
        if graph is None or authority is None:
            raise TypeError("graph, authority: required without a service")
        return ApprovalService(
            graph, authority, settings=settings, config=config, page_tools=page_tools
        )
    if graph is not None and graph is not service.graph:
        raise ValueError("graph: the service serves another graph")
    if authority is not None and authority is not service.authority:
        raise ValueError("authority: the service has another authority")
    if settings is not None and settings != service.settings:
        raise ValueError("settings: the service holds its own")
    return service


@functools.lru_cache(maxsize=64)
def _keyword_parameters(init: Any) -> frozenset[str] | None:
    """The names ``init`` takes by keyword; None when it takes any (``**kwargs``)."""
    try:
        parameters = inspect.signature(init).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in parameters if p.kind in keyword)


def _identical(validated: Any, value: Any) -> bool:
    """Whether ``value`` is ``validated`` (an interrupt value that was validated) or holds
    exactly the same JSON: the same types throughout (``True`` is not ``1``, ``1.0`` is not
    ``1``), so it would validate the same way."""
    if validated is value:
        return True
    if type(validated) is not type(value):
        return False
    if isinstance(validated, dict):
        return validated.keys() == value.keys() and all(
            _identical(item, value[key]) for key, item in validated.items()
        )
    if isinstance(validated, list):
        return len(validated) == len(value) and all(map(_identical, validated, value))
    return bool(validated == value)


def _is_legacy_approval_event(event: Any) -> bool:
    # The event's value is the interrupt value as JSON text; its raw_event is the interrupt.
    return (
        getattr(event, "type", None) == EventType.CUSTOM
        and getattr(event, "name", None) == LangGraphEventTypes.OnInterrupt.value
        and is_approval_request(getattr(getattr(event, "raw_event", None), "value", None))
    )
