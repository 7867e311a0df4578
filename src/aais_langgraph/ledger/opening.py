"""Open a ledger from the ``--db`` value users pass everywhere: a SQLite path or a Postgres URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .base import Ledger
from .sqlite import SqliteLedger

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


def is_postgres_url(target: str) -> bool:
    """True for a ``postgres://`` or ``postgresql://`` URL."""
    return target.startswith(POSTGRES_SCHEMES)


@contextmanager
def open_ledger(target: str, *, setup: bool = True) -> Iterator[Ledger]:
    """A ledger for ``target`` (SQLite file path or Postgres URL), closed on exit.

    The schema is created when missing unless ``setup=False``. Postgres needs the
    ``postgres`` extra.
    """
    if not target:
        raise ValueError("db: expected a SQLite file path or a postgresql:// URL")
    if is_postgres_url(target):
        from .postgres import PostgresLedger

        with PostgresLedger.from_conn_string(target, pool_size=4) as ledger:
            if setup:
                ledger.setup()
            yield ledger
        return
    ledger_file = SqliteLedger(target)
    try:
        if setup:
            ledger_file.setup()
        yield ledger_file
    finally:
        ledger_file.close()
