"""The blocking-call detector LangGraph Server runs its graphs under, for tests in process.

``langgraph dev`` (``langgraph-runtime-inmem``) activates ``blockbuster`` when its
queue starts, unless ``--allow-blocking`` is given: every covered call made on the
event loop's thread raises ``BlockingError``. :func:`server_detector` activates the
very same configuration (the server's own function, so it follows the installed
release), and adds psycopg's synchronous waits: libpq does its I/O in C, out of
blockbuster's sight, so a synchronous Postgres query on the loop would otherwise
pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from blockbuster import BlockBuster, BlockBusterFunction
from blockbuster.blockbuster import BlockingError

__all__ = ["BlockingError", "server_detector"]


def _psycopg_functions() -> dict[str, BlockBusterFunction]:
    """psycopg's synchronous funnels: every query, connect and pool checkout passes one."""
    import psycopg.waiting
    import psycopg_pool

    return {
        "psycopg.waiting.wait": BlockBusterFunction(psycopg.waiting, "wait"),
        "psycopg.waiting.wait_conn": BlockBusterFunction(psycopg.waiting, "wait_conn"),
        "psycopg_pool.ConnectionPool.getconn": BlockBusterFunction(
            psycopg_pool.ConnectionPool, "getconn"
        ),
    }


@contextmanager
def server_detector() -> Iterator[BlockBuster]:
    """LangGraph Server's blockbuster (``langgraph_runtime_inmem.queue``), plus psycopg's
    synchronous waits, active for the block; everything restored afterwards."""
    from langgraph_runtime_inmem import queue

    original_init: Any = BlockingError.__init__
    detector: BlockBuster = queue._enable_blockbuster()
    extra = _psycopg_functions()
    for function in extra.values():
        function.activate()
    try:
        yield detector
    finally:
        for function in extra.values():
            function.deactivate()
        detector.deactivate()
        # The server rewrites the error's message once per process; undo it per use.
        BlockingError.__init__ = original_init  # type: ignore[method-assign]
