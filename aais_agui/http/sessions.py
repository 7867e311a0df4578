"""Server-side browser sessions: who a session cookie stands for, until when, kept by the server.

The browser holds only a random session id (an HttpOnly cookie); the store keeps the
person it stands for (actor and groups) and when the session ends, under the SHA-256 of
the id, so a copy of the store opens no session. Ending a session server side (sign-out,
revocation) makes the cookie worthless at once, and every stream that re-authenticates
on it ends. The store also holds the sign-ins under way (the OpenID Connect ``state``,
``nonce`` and PKCE verifier of each), taken once.

:class:`InMemorySessionStore` is the default; :class:`SqliteSessionStore` keeps both in a
file, so a restart (or another process on the same file) keeps the sessions. Neither is
part of the approval ledger.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BrowserSession",
    "InMemorySessionStore",
    "PendingSignIn",
    "SessionStore",
    "SqliteSessionStore",
    "session_key",
]


def session_key(secret: str) -> str:
    """The key a session or sign-in is stored under: the hex SHA-256 of its secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class BrowserSession:
    """One signed-in browser: the actor (AAIS JSON), their groups, and the session's end."""

    actor: dict[str, Any]
    groups: tuple[str, ...]
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class PendingSignIn:
    """A sign-in sent to the identity provider and not back yet.

    ``browser`` is the key of the random value the starting browser holds in a cookie: the
    callback is accepted only from that browser (no signing in someone else's browser).
    """

    code_verifier: str
    nonce: str
    browser: str
    next_path: str
    expires_at: float


class SessionStore(Protocol):
    """Where sessions and sign-ins under way are kept; keys come from :func:`session_key`.

    Every method is synchronous and quick; the sign-in runs a file-backed store's calls
    off the event loop (:attr:`blocking`).
    """

    blocking: bool

    def put_session(self, key: str, session: BrowserSession) -> None: ...
    def get_session(self, key: str, *, now: float) -> BrowserSession | None:
        """The live session under ``key`` (None: unknown, ended, or expired at ``now``)."""
        ...

    def end_session(self, key: str) -> bool:
        """End the session under ``key``; whether there was one."""
        ...

    def end_sessions_of(self, actor_id: str) -> int:
        """End every session of ``actor_id``; how many ended."""
        ...

    def put_sign_in(self, key: str, pending: PendingSignIn) -> None: ...
    def take_sign_in(self, key: str, *, now: float) -> PendingSignIn | None:
        """Remove and return the sign-in under ``key`` unless unknown or expired at ``now``."""
        ...

    def purge(self, *, now: float) -> int:
        """Drop what expired before ``now``; how many rows went."""
        ...


class InMemorySessionStore:
    """Sessions in this process's memory (lost on restart)."""

    blocking = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, BrowserSession] = {}
        self._sign_ins: dict[str, PendingSignIn] = {}

    def put_session(self, key: str, session: BrowserSession) -> None:
        with self._lock:
            self._sessions[key] = session

    def get_session(self, key: str, *, now: float) -> BrowserSession | None:
        with self._lock:
            session = self._sessions.get(key)
        return session if session is not None and now < session.expires_at else None

    def end_session(self, key: str) -> bool:
        with self._lock:
            return self._sessions.pop(key, None) is not None

    def end_sessions_of(self, actor_id: str) -> int:
        with self._lock:
            keys = [k for k, s in self._sessions.items() if s.actor.get("id") == actor_id]
            for key in keys:
                del self._sessions[key]
        return len(keys)

    def put_sign_in(self, key: str, pending: PendingSignIn) -> None:
        with self._lock:
            self._sign_ins[key] = pending

    def take_sign_in(self, key: str, *, now: float) -> PendingSignIn | None:
        with self._lock:
            pending = self._sign_ins.pop(key, None)
        return pending if pending is not None and now < pending.expires_at else None

    def purge(self, *, now: float) -> int:
        with self._lock:
            ended = [k for k, s in self._sessions.items() if s.expires_at <= now]
            stale = [k for k, p in self._sign_ins.items() if p.expires_at <= now]
            for key in ended:
                del self._sessions[key]
            for key in stale:
                del self._sign_ins[key]
        return len(ended) + len(stale)


_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS aais_browser_sessions (
        key TEXT PRIMARY KEY,
        actor_id TEXT NOT NULL,
        actor TEXT NOT NULL,
        groups TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS aais_browser_sessions_actor ON aais_browser_sessions (actor_id)",
    """CREATE TABLE IF NOT EXISTS aais_sign_ins (
        key TEXT PRIMARY KEY,
        code_verifier TEXT NOT NULL,
        nonce TEXT NOT NULL,
        browser TEXT NOT NULL,
        next_path TEXT NOT NULL,
        expires_at REAL NOT NULL
    )""",
)


class SqliteSessionStore:
    """Sessions in a SQLite file: they outlive a restart and are shared by the processes
    that open the same file. The tables are created when the store is opened."""

    blocking = True

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            str(path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._connection.execute("PRAGMA journal_mode=WAL")
        for statement in _SCHEMA:
            self._connection.execute(statement)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._connection.close()

    def _run(self, sql: str, parameters: tuple[Any, ...] = ()) -> tuple[list[Any], int]:
        """The statement's rows and row count, read while the connection is held."""
        with self._lock:
            cursor = self._connection.execute(sql, parameters)
            rows = cursor.fetchall()
            return rows, cursor.rowcount

    def put_session(self, key: str, session: BrowserSession) -> None:
        self._run(
            "INSERT INTO aais_browser_sessions VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                str(session.actor.get("id", "")),
                json.dumps(session.actor, sort_keys=True),
                json.dumps(list(session.groups)),
                session.created_at,
                session.expires_at,
            ),
        )

    def get_session(self, key: str, *, now: float) -> BrowserSession | None:
        rows, _ = self._run(
            "SELECT actor, groups, created_at, expires_at FROM aais_browser_sessions "
            "WHERE key = ? AND expires_at > ?",
            (key, now),
        )
        if not rows:
            return None
        actor, groups, created_at, expires_at = rows[0]
        return BrowserSession(json.loads(actor), tuple(json.loads(groups)), created_at, expires_at)

    def end_session(self, key: str) -> bool:
        return self._run("DELETE FROM aais_browser_sessions WHERE key = ?", (key,))[1] > 0

    def end_sessions_of(self, actor_id: str) -> int:
        return self._run("DELETE FROM aais_browser_sessions WHERE actor_id = ?", (actor_id,))[1]

    def put_sign_in(self, key: str, pending: PendingSignIn) -> None:
        self._run(
            "INSERT INTO aais_sign_ins VALUES (?, ?, ?, ?, ?, ?)",
            (
                key,
                pending.code_verifier,
                pending.nonce,
                pending.browser,
                pending.next_path,
                pending.expires_at,
            ),
        )

    def take_sign_in(self, key: str, *, now: float) -> PendingSignIn | None:
        # DELETE ... RETURNING: one process takes a sign-in, however many share the file.
        rows, _ = self._run(
            "DELETE FROM aais_sign_ins WHERE key = ? "
            "RETURNING code_verifier, nonce, browser, next_path, expires_at",
            (key,),
        )
        if not rows:
            return None
        pending = PendingSignIn(*rows[0])
        return pending if now < pending.expires_at else None

    def purge(self, *, now: float) -> int:
        _, ended = self._run("DELETE FROM aais_browser_sessions WHERE expires_at <= ?", (now,))
        _, stale = self._run("DELETE FROM aais_sign_ins WHERE expires_at <= ?", (now,))
        return ended + stale
