"""What ``create_app`` serves: the graph joined to its checkpointer, checked before it serves.

The server runs graphs asynchronously (``astream``), so a checkpointer must have
working async methods: a synchronous one (``SqliteSaver``, ``PostgresSaver``)
would fail every run, and is refused here in one line naming its async twin. A graph
with no checkpointer at all could not pause on an approval, and is refused as well.

A graph whose gates were handed an authority over another ledger than the server's
(``ApprovalMiddleware(..., authority=ApprovalAuthority(SqliteLedger("approvals.db")))``
served by ``aais-agui serve --db aais-agui.db``) is refused before it serves, naming
both places: the gates would record requests nobody is shown, and every answer would
find no such request. The search follows what the graph's nodes hold
(:func:`gate_authorities`); an authority built while a node runs escapes it, and the
gate refuses that one at its first request instead.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections import deque
from collections.abc import Mapping
from types import CodeType, FunctionType, MethodType, ModuleType
from typing import Any

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.gate import LedgerMismatchError
from aais_langgraph.ledger import same_ledger

#: Synchronous savers by (module, class), and the async twin to use instead.
_SYNC_SAVERS = (
    (
        "langgraph.checkpoint.sqlite",
        "SqliteSaver",
        "AsyncSqliteSaver.from_conn_string(path) from langgraph.checkpoint.sqlite.aio",
    ),
    (
        "langgraph.checkpoint.postgres",
        "PostgresSaver",
        "AsyncPostgresSaver.from_conn_string(url) from langgraph.checkpoint.postgres.aio",
    ),
    (
        "langgraph.checkpoint.postgres",
        "ShallowPostgresSaver",
        "AsyncPostgresSaver.from_conn_string(url) from langgraph.checkpoint.postgres.aio",
    ),
)


def opens_checkpointer(checkpointer: Any) -> bool:
    """True for an async context manager that opens a checkpointer (``from_conn_string``);
    a synchronous context manager is refused with ``TypeError``."""
    if checkpointer is None or _is_saver(checkpointer):
        return False
    if hasattr(checkpointer, "__aenter__") and hasattr(checkpointer, "__aexit__"):
        return True
    if hasattr(checkpointer, "__enter__"):
        raise TypeError(
            "checkpointer: a synchronous context manager; the server runs graphs "
            "asynchronously: pass AsyncSqliteSaver.from_conn_string(path) (or "
            "AsyncPostgresSaver.from_conn_string(url))"
        )
    raise TypeError(
        "checkpointer: expected a checkpointer or an async context manager that opens one "
        "(AsyncSqliteSaver.from_conn_string(path))"
    )


def refuse_sync_checkpointer(checkpointer: Any, field: str = "checkpointer") -> None:
    """Raise ``TypeError`` naming ``field`` when ``checkpointer`` has no async methods."""
    if checkpointer is None or isinstance(checkpointer, bool):
        return
    for module_name, class_name, instead in _SYNC_SAVERS:
        saver_class = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(saver_class, type) and isinstance(checkpointer, saver_class):
            raise TypeError(
                f"{field}: {class_name} is synchronous and the server runs graphs "
                f"asynchronously; use {instead}"
            )
    from langgraph.checkpoint.base import BaseCheckpointSaver

    if (
        isinstance(checkpointer, BaseCheckpointSaver)
        and type(checkpointer).aget_tuple is BaseCheckpointSaver.aget_tuple
    ):
        raise TypeError(
            f"{field}: {type(checkpointer).__name__} has no async methods and the server "
            "runs graphs asynchronously; use an async checkpointer"
        )


def served_graph(graph: Any, checkpointer: Any) -> Any:
    """``graph`` (compiled, or a ``StateGraph`` builder) with ``checkpointer`` (None: its
    own, which it must have); ``TypeError`` naming the field for what cannot serve."""
    from langgraph.pregel import Pregel

    if checkpointer is not None:
        refuse_sync_checkpointer(checkpointer)
        check_takes_checkpointer(graph)
        if isinstance(graph, Pregel):
            return graph.copy(update={"checkpointer": checkpointer})
        return graph.compile(checkpointer=checkpointer)
    if not isinstance(graph, Pregel) and callable(getattr(graph, "compile", None)):
        raise TypeError(
            "checkpointer: a StateGraph builder needs one to pause on approvals; pass "
            "checkpointer=AsyncSqliteSaver.from_conn_string(path)"
        )
    if isinstance(graph, Pregel):
        if not _has_checkpointer(graph):
            raise TypeError(
                "checkpointer: the graph was compiled without one and cannot pause on "
                "approvals; pass checkpointer=AsyncSqliteSaver.from_conn_string(path) "
                "(or compile it with an async checkpointer)"
            )
        refuse_sync_checkpointer(graph.checkpointer, "graph.checkpointer")
    return graph


def check_takes_checkpointer(graph: Any) -> None:
    """``TypeError`` naming ``graph`` unless it is a ``StateGraph`` builder or a graph
    compiled without a checkpointer (what ``checkpointer=`` can be given to)."""
    from langgraph.pregel import Pregel

    if isinstance(graph, Pregel):
        if _has_checkpointer(graph):
            raise TypeError(
                "graph: it was compiled with its own checkpointer and checkpointer= was "
                "given too; compile it without one, or leave out checkpointer="
            )
    elif not callable(getattr(graph, "compile", None)):
        raise TypeError("graph: expected a compiled graph or a StateGraph builder")


def _has_checkpointer(graph: Any) -> bool:
    saver = graph.checkpointer
    return saver is not None and not isinstance(saver, bool)


def _is_saver(value: Any) -> bool:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    return isinstance(value, BaseCheckpointSaver)


_WALK_LIMIT = 20_000
"""How many objects the search for a graph's gate authorities looks at, at most."""
_LEAVES = (str, bytes, bytearray, int, float, complex, bool, type(None), type, ModuleType)


def gate_authorities(graph: Any) -> list[ApprovalAuthority]:
    """The authorities a graph's gates were handed, found by following what its nodes
    hold: attributes, closures, the module authorities their functions name, bound
    methods, partials and containers (breadth first, at most ``_WALK_LIMIT`` objects; the
    checkpointer and the store are not entered). An authority a node builds as it runs
    is not found here; the gate refuses that one at the first request."""
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    found: dict[int, ApprovalAuthority] = {}
    seen: set[int] = set()
    queue: deque[Any] = deque([graph])
    while queue and len(seen) < _WALK_LIMIT:
        value = queue.popleft()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, ApprovalAuthority):
            found.setdefault(id(value), value)
        elif not isinstance(value, (*_LEAVES, BaseCheckpointSaver, BaseStore)):
            queue.extend(_held_by(value))
    return list(found.values())


def refuse_other_ledgers(graph: Any, authority: ApprovalAuthority) -> None:
    """:class:`~aais_langgraph.gate.LedgerMismatchError` naming both places when a gate
    of ``graph`` records its approvals in another ledger than ``authority``'s (the
    server's): the people the server shows requests to would never see them, and their
    answers would find none."""
    for gate_authority in gate_authorities(graph):
        if gate_authority is authority or same_ledger(gate_authority.ledger, authority.ledger):
            continue
        raise LedgerMismatchError.between(gate_authority.ledger, authority.ledger)


def _held_by(value: Any) -> list[Any]:
    """What ``value`` holds that a gate's authority may hide in."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, (list, tuple, set, frozenset, deque)):
        return list(value)
    held: list[Any] = []
    if isinstance(value, functools.partial):
        held.extend([value.func, *value.args, *value.keywords.values()])
    if isinstance(value, MethodType):
        held.extend([value.__self__, value.__func__])
    if isinstance(value, FunctionType):
        held.extend(cell.cell_contents for cell in value.__closure__ or () if _filled(cell))
        held.extend(value.__defaults__ or ())
        held.extend((value.__kwdefaults__ or {}).values())
        held.extend(  # a module's authority its function names; nothing else of a module
            value.__globals__[name]
            for name in _global_names(value.__code__)
            if isinstance(value.__globals__.get(name), ApprovalAuthority)
        )
    with contextlib.suppress(TypeError):  # no __dict__: its slots, below
        held.extend(vars(value).values())
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                held.append(getattr(value, slot, None))
    return held


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _global_names(code: CodeType) -> set[str]:
    """The global names ``code`` and the functions defined in it use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _global_names(constant)
    return names
