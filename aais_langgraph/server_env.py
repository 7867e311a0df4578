"""The approval authority configured from the environment, for graphs hosted by a server.

A graph served by LangGraph Server (``langgraph dev``, or the licensed server)
is imported by the server, which gives it a checkpointer but no way to hand it
Python objects: the runtime context and ``configurable`` arrive as JSON. So a
gate there finds its authority through the environment instead:

``AAIS_LEDGER_URL``
    The approval ledger: a SQLite file path, or a ``postgresql://`` URL
    (needs the ``postgres`` extra). Every replica of a deployment must point at
    the same ledger. Required.
``AAIS_LEDGER_SETUP``
    ``1`` (default) creates the ledger's tables when missing (idempotent, safe
    from several processes at once); ``0`` expects them to exist.
``AAIS_APPROVAL_EXPIRY_SECONDS``
    Default lifetime of a request that does not set its own (default 900).
``AAIS_AUTHORITY_KEY_FILE`` / ``AAIS_AUTHORITY_KEY``
    The optional authority key that seals recorded rows (see
    :mod:`aais_langgraph.authority.keys`); every replica needs the same key.

:func:`authority_from_env` opens that ledger once per process and returns the
same :class:`~aais_langgraph.authority.ApprovalAuthority` on every call. When
``AAIS_LEDGER_URL`` is set, ``request_approval`` and the other gates use it
whenever no authority is passed in and none travels with the run, so a graph
written for the embedded setup runs on the server unchanged. The ledger stays
open until the process exits.

LangGraph Server runs async nodes on its event loop and fails any blocking call
there. Async gates therefore find the authority with
:func:`aauthority_from_env`: the first call opens the ledger (connection or pool,
schema, key file) in a worker thread, later ones read the cache without a lock.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta

from .authority import ApprovalAuthority
from .ledger import Ledger, SqliteLedger
from .ledger.opening import is_postgres_url

__all__ = [
    "EXPIRY_VAR",
    "LEDGER_URL_VAR",
    "SETUP_VAR",
    "aauthority_from_env",
    "authority_from_env",
    "close_env_authorities",
    "env_authority_configured",
]

LEDGER_URL_VAR = "AAIS_LEDGER_URL"
SETUP_VAR = "AAIS_LEDGER_SETUP"
EXPIRY_VAR = "AAIS_APPROVAL_EXPIRY_SECONDS"

_POOL_SIZE = 10
_lock = threading.Lock()
_authorities: dict[tuple[str, bool, float], ApprovalAuthority] = {}
_closers: list[Callable[[], None]] = []


def env_authority_configured(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``AAIS_LEDGER_URL`` is set (to something non-empty)."""
    env = os.environ if environ is None else environ
    return bool(env.get(LEDGER_URL_VAR, "").strip())


def _settings(env: Mapping[str, str]) -> tuple[str, bool, float]:
    target = env.get(LEDGER_URL_VAR, "").strip()
    if not target:
        raise RuntimeError(
            f"{LEDGER_URL_VAR}: set it to a SQLite file path or a postgresql:// URL "
            "for the approval ledger"
        )
    setup_text = env.get(SETUP_VAR, "1").strip()
    if setup_text not in ("0", "1"):
        raise ValueError(f"{SETUP_VAR}: expected 0 or 1")
    expiry_text = env.get(EXPIRY_VAR, "900").strip()
    try:
        expiry = float(expiry_text)
    except ValueError:
        raise ValueError(f"{EXPIRY_VAR}: expected a number of seconds") from None
    if not expiry > 0 or expiry == float("inf"):
        raise ValueError(f"{EXPIRY_VAR}: expected a positive, finite number of seconds")
    return target, setup_text == "1", expiry


def _open(target: str, setup: bool) -> tuple[Ledger, Callable[[], None]]:
    """A long-lived ledger for ``target`` and the function that closes it."""
    if is_postgres_url(target):
        from psycopg_pool import ConnectionPool

        from .ledger.postgres import PostgresLedger

        pool: ConnectionPool = ConnectionPool(
            target,
            min_size=1,
            max_size=_POOL_SIZE,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            open=True,
        )
        return PostgresLedger(pool), pool.close
    ledger = SqliteLedger(target, auto_setup=setup)
    return ledger, ledger.close


def authority_from_env(environ: Mapping[str, str] | None = None) -> ApprovalAuthority:
    """The process-wide authority on the ledger ``AAIS_LEDGER_URL`` names.

    Opened on first use and cached per setting, so every gate and resume in the
    process shares one ledger connection (SQLite) or pool (Postgres). Raises
    ``RuntimeError`` when the variable is missing.
    """
    settings = _settings(os.environ if environ is None else environ)
    with _lock:
        found = _authorities.get(settings)
        if found is not None:
            return found
        target, setup, expiry = settings
        ledger, close = _open(target, setup)
        try:
            if setup:
                ledger.setup()
        except BaseException:
            close()
            raise
        if not _closers:
            atexit.register(close_env_authorities)
        _closers.append(close)
        authority = ApprovalAuthority(ledger, default_expiry=timedelta(seconds=expiry))
        _authorities[settings] = authority
        return authority


async def aauthority_from_env(environ: Mapping[str, str] | None = None) -> ApprovalAuthority:
    """Async twin of :func:`authority_from_env`, for a gate on an event loop: the ledger
    is opened in a worker thread the first time; afterwards the opened authority is
    returned at once, with no lock taken and no I/O on the loop."""
    settings = _settings(os.environ if environ is None else environ)
    found = _authorities.get(settings)  # one dict read: atomic, never blocks
    if found is not None:
        return found
    return await asyncio.to_thread(authority_from_env, environ)


def close_env_authorities() -> None:
    """Close every ledger :func:`authority_from_env` opened (at exit, in tests, before a
    fork); the next call opens a fresh one."""
    with _lock:
        _authorities.clear()
        while _closers:
            close = _closers.pop()
            with contextlib.suppress(Exception):  # closing at exit: nothing left to report to
                close()
