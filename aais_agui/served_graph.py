"""What ``create_app`` serves: the graph joined to its checkpointer, checked before it serves.

The server runs graphs asynchronously (``astream``), so a checkpointer must have
working async methods: a synchronous one (``SqliteSaver``, ``PostgresSaver``)
would fail every run, and is refused here in one line naming its async twin. A graph
with no checkpointer at all could not pause on an approval, and is refused as well.
"""

from __future__ import annotations

import sys
from typing import Any

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
