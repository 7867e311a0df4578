"""The LangGraph checkpointer the CLI reconciles the ledger with (``pending``), read only."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from ..ledger import NotALedgerError, is_postgres_url

__all__ = ["holds_checkpoints", "open_checkpointer"]


def holds_checkpoints(target: str) -> bool:
    """Whether ``target`` (SQLite file or Postgres URL) has LangGraph's checkpoint table."""
    if is_postgres_url(target):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass('checkpoints') IS NOT NULL").fetchone()
        return bool(row and row[0])
    if not Path(target).is_file():
        return False
    with closing(sqlite3.connect(f"file:{Path(target).resolve()}?mode=ro", uri=True)) as conn:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
        ).fetchone()
    return row is not None


@contextmanager
def open_checkpointer(target: str) -> Iterator[Any]:
    """A checkpointer on ``target``; needs the ``sqlite`` or ``postgres`` extra."""
    if is_postgres_url(target):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as saver:
            yield saver
        return
    if not holds_checkpoints(target):
        raise NotALedgerError("checkpoints: no LangGraph checkpoints in this file")
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(target) as saver:
        yield saver
