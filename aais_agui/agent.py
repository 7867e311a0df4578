"""An AG-UI agent for LangGraph graphs whose interrupts are AAIS approvals.

Built on ag-ui-langgraph's ``LangGraphAgent`` (``>=0.0.47,<0.1``; seams read on 0.0.47).
Two private seams are overridden, each in a few lines, and
``tests/agui/test_agent_seams.py`` fails loudly if an upgrade moves them (CI runs it
against the newest release too, ``scripts/ci_newest_agui.sh``):

- ``_interrupts_to_agui``: an ``approval.requested`` interrupt value becomes an
  interrupt with ``metadata.aais`` (see :mod:`aais_agui.mapping`);
- ``_build_command_from_agui_resume``: returns the id-keyed resume map planned
  in :meth:`AAISLangGraphAgent.run` under the thread's run lease;
- ``get_stream_kwargs``: no ``context`` for a graph without a context schema (ag-ui-langgraph
  fills it with ``configurable``, which ``ToolRuntime`` tools then warn about);
- ``get_schema_keys``: worked out once per compiled graph, not on every run (it
  builds the graph's JSON Schemas: about 25 ms for a graph with ``messages``).

Everything else (streaming, snapshots, re-emitting pending interrupts on a
run without ``resume``) is ag-ui-langgraph's, but for two AG-UI 1.0 outcome details
(:mod:`.outcomes`): ``cancelled`` when a resume only cancelled, and ``subagentRunId``
on approvals raised inside subgraphs.

One way in: every answer reaches the graph through :func:`~aais_agui.resume_plan.plan_resume`
under the authenticated actor. ``forwardedProps`` that would steer the graph
around it (ag-ui-langgraph's legacy ``command`` resume, ``nodeName``'s state write
as if a node had run) are refused with ``RUN_ERROR`` before anything is read or
recorded, and the graph runs with ``configurable[RECORDED_ONLY_KEY]`` set, so its
gates accept only resolutions the authority already recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from ag_ui_langgraph import LangGraphAgent
from ag_ui_langgraph.utils import camel_to_snake
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command
from typing_extensions import Self

from aais_langgraph.authority import (
    DEFAULT_LEASE_TTL,
    FORBIDDEN,
    ApprovalAuthority,
    LeaseHeldError,
    Principal,
    checked_principal,
)
from aais_langgraph.gate import REQUESTER_KEY
from aais_langgraph.protocol import AAISValidationError, Actor
from aais_langgraph.threads import DEFAULT_LEASE_WAIT, ThreadDriver, ThreadView

from .mapping import is_approval_request, request_to_interrupt
from .reoffer import reoffer_events
from .resume_plan import ResumeRejected, plan_resume, served_config
from .run_outcomes import aattribute_interrupts, acancel_watch, settle_outcome

logger = logging.getLogger(__name__)

#: ag-ui-langgraph's schema keys of each compiled graph served (they depend on the graph only).
_SCHEMA_KEYS: weakref.WeakKeyDictionary[Any, dict[str, list[str]]] = weakref.WeakKeyDictionary()


class AAISLangGraphAgent(LangGraphAgent):  # type: ignore[misc]  # ag-ui-langgraph is untyped
    """Serve a compiled LangGraph graph over AG-UI with AAIS approvals as interrupts.

    ``authority`` judges every decision; it also reaches the graph's gates
    through ``configurable["aais_authority"]``. Each run holds the thread's run
    lease, so two presenters can never drive one paused thread at once. Set
    :attr:`actor` (the authenticated actor, see :meth:`with_actor`) before a run
    that answers approvals: a resume without one is refused.
    """

    config: dict[str, Any]
    """The run config (ag-ui-langgraph's): the authority and the requester in ``configurable``."""

    def __init__(
        self,
        *,
        name: str,
        graph: Any,
        authority: ApprovalAuthority,
        description: str | None = None,
        config: Mapping[str, Any] | None = None,
        emit_raw_events: bool = False,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        lease_wait: float = DEFAULT_LEASE_WAIT,
    ) -> None:
        super().__init__(
            name=name,
            graph=graph,
            description=description,
            config=served_config(config, authority),
            enable_legacy_on_interrupt_event=False,
            emit_interrupt_outcome=True,
            emit_raw_events=emit_raw_events,
        )
        self.authority = authority
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        self.actor: Principal | Actor | Mapping[str, Any] | None = None
        self._planned_resume: dict[str, Any] | None = None
        self.driver = ThreadDriver(
            graph, authority, lease_ttl=lease_ttl, lease_wait=lease_wait, served=True
        )

    def clone(self) -> Self:
        """A fresh agent with the same settings and actor (one per request)."""
        twin = type(self)(
            name=self.name,
            graph=self.graph,
            authority=self.authority,
            description=self.description,
            config=self.config,
            emit_raw_events=self.emit_raw_events,
            lease_ttl=self.lease_ttl,
            lease_wait=self.lease_wait,
        )
        twin.actor = self.actor
        return twin

    def with_actor(self, actor: Principal | Actor | Mapping[str, Any] | None) -> Self:
        """A clone that answers approvals as ``actor`` (the authenticated one), and whose
        runs ask for approvals on their behalf (``configurable["aais_requester"]``: held
        to the authority's :class:`~aais_langgraph.authority.RequestLimits`)."""
        twin = self.clone()
        twin.actor = actor
        requester = actor.id if isinstance(actor, (Actor, Principal)) else (actor or {}).get("id")
        requester = requester if isinstance(requester, str) else None
        if requester is not None:
            configurable = {**twin.config["configurable"], REQUESTER_KEY: requester}
            twin.config = {**twin.config, "configurable": configurable}
        return twin

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
        seen = await asyncio.to_thread(self.authority.may_view_thread, principal, input.thread_id)
        if not seen.allowed:
            # Another person's thread: no byte of it (messages, interrupts) is sent.
            for event in _refusal(input, FORBIDDEN, f"forbidden: {seen.reason}"):
                yield event
            return
        if principal is not None:  # the first run records who started the thread
            owner = await self.authority.ledger.aown_thread(
                input.thread_id, principal.id, now=time.time()
            )
            # Requests the run raises are asked for the person who started the thread,
            # even when someone else (an approver) resumes it.
            current: Any = self.config
            configurable = {**current["configurable"], REQUESTER_KEY: owner}
            self.config = {**current, "configurable": configurable}
        try:
            # The driver's lease and view; ag-ui-langgraph's run (which streams) invokes the
            # graph with the planned map through _build_command_from_agui_resume.
            config = {"configurable": {**self.config["configurable"], "thread_id": input.thread_id}}
            async with self.driver.aleased(config) as thread:
                watch = None
                view = await thread.aview()
                if input.resume:
                    watch = await acancel_watch(
                        self.graph,
                        self.authority,
                        config,
                        view.open,
                        input.resume,
                        protocol_version=input.protocol_version,
                    )
                    self._planned_resume = await self._plan(view, input.resume)
                else:
                    recorded = await asyncio.to_thread(self._recorded_answers, view)
                    if recorded:
                        # Answered elsewhere and not resumed yet (a crash, a busy lease):
                        # resume with the recorded answers instead of offering them again.
                        await thread.aresume(recorded)
                        await asyncio.to_thread(self.driver.settle_resumed, view, recorded)
                        for event in await self._after_recorded(input, config):
                            yield await aattribute_interrupts(event, self.authority)
                        return
                async for event in settle_outcome(super().run(input), watch, self.graph, config):
                    yield await aattribute_interrupts(event, self.authority)
                if self._planned_resume:
                    await asyncio.to_thread(self.driver.settle_resumed, view, self._planned_resume)
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
                    await self.driver.aresume_resolved(input.thread_id, lease_wait=0)
                except LeaseHeldError:
                    logger.info("an expired request's thread is busy; its resume work stays due")
            for event in await reoffer_events(
                self.graph,
                self.authority,
                thread_id=input.thread_id,
                code=rejected.code,
                configurable=self.config["configurable"],
                to_agui=self._interrupts_to_agui,
            ):
                yield await aattribute_interrupts(event, self.authority)
        except LeaseHeldError:
            for event in _refusal(
                input, "aais.thread_busy", "another run is driving this thread; retry shortly"
            ):
                yield event

    def _recorded_answers(self, view: ThreadView) -> dict[str, Any]:
        """Interrupt id -> recorded resolution, for the open interrupts already answered."""
        answers: dict[str, Any] = {}
        for request_id, interrupt_id in view.interrupts.items():
            recorded = self.authority.get_resolution(request_id)
            if recorded is not None:
                answers[interrupt_id] = recorded.to_json()
        return answers

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

    async def _plan(self, view: ThreadView, entries: list[ResumeEntry]) -> dict[str, Any]:
        try:
            return await asyncio.to_thread(
                plan_resume, self.authority, view.open, entries, actor=self.actor
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
                mapped.append(request_to_interrupt(raw.value, interrupt_id=raw.id))
            else:
                mapped.extend(super()._interrupts_to_agui([raw]))
        return mapped

    def _build_command_from_agui_resume(
        self, entries: list[ResumeEntry], *, open_interrupts: list[Interrupt] | None = None
    ) -> Command[Any]:
        if self._planned_resume is None:
            raise RuntimeError("a resume reached the graph unplanned; use AAISLangGraphAgent.run")
        return Command(resume=dict(self._planned_resume))

    def get_schema_keys(self, config: Any) -> dict[str, list[str]]:
        # ag-ui-langgraph builds the input, output and config JSON Schemas on every run to
        # list their keys; for a compiled StateGraph they depend on the graph alone.
        if not isinstance(self.graph, CompiledStateGraph):
            return dict(super().get_schema_keys(config))
        keys = _SCHEMA_KEYS.get(self.graph)
        if keys is None:
            keys = {name: list(found) for name, found in super().get_schema_keys(config).items()}
            _SCHEMA_KEYS[self.graph] = keys
        return {name: list(found) for name, found in keys.items()}

    def get_stream_kwargs(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # ag-ui-langgraph copies config["configurable"] (the authority, the thread id) into
        # `context`; a graph without a context schema types it None, so every ToolRuntime
        # tool logged pydantic serializer warnings, and nothing there reads it.
        stream_kwargs: dict[str, Any] = super().get_stream_kwargs(*args, **kwargs)
        if getattr(self.graph, "context_schema", None) is None:
            stream_kwargs.pop("context", None)
        return stream_kwargs


#: ``forwardedProps`` keys (as ag-ui-langgraph reads them, snake_cased) that steer a run:
#: ``command`` becomes ``Command(resume=...)`` outside the planner, ``node_name`` writes the
#: client's state as if that node had run and continues after it.
STEERING_PROPS = frozenset({"command", "node_name"})


def steering_props(forwarded_props: Any) -> list[str]:
    """The keys of ``forwardedProps`` that would steer the graph around the planner."""
    if not isinstance(forwarded_props, Mapping):
        return []
    return [key for key in forwarded_props if camel_to_snake(str(key)) in STEERING_PROPS]


def _refusal(input: RunAgentInput, code: str, message: str) -> list[BaseEvent]:
    return [
        RunStartedEvent(type=EventType.RUN_STARTED, thread_id=input.thread_id, run_id=input.run_id),
        RunErrorEvent(type=EventType.RUN_ERROR, message=message, code=code),
    ]
