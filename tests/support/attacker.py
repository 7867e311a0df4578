"""The ledger's storage as someone who can write it (but holds no authority key) edits it.

:class:`Storage` runs SQL on a SQLite file or a Postgres schema, as ``sqlite3`` or
``psql`` would, and appends audit entries whose chain hash it computes itself, moving
the recorded tip along: everything a check can recompute without the key, the
attacker gets right.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aais_langgraph.ledger import GENESIS_HASH, chain_hash
from aais_langgraph.ledger.records import dump_json


@dataclasses.dataclass(frozen=True)
class Storage:
    """Where a ledger keeps its rows: a SQLite file (a Path) or a Postgres URL (a str)."""

    where: Path | str

    @property
    def postgres(self) -> bool:
        return isinstance(self.where, str)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if isinstance(self.where, str):
            import psycopg

            with psycopg.connect(self.where) as conn:
                yield conn
        else:
            conn = sqlite3.connect(self.where)
            try:
                with conn:
                    yield conn
            finally:
                conn.close()

    def sql(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (``?`` marks); its rows, if it returns any."""
        with self._connection() as conn:
            text = statement.replace("?", "%s") if self.postgres else statement
            cursor = conn.execute(text, params)
            try:
                return [tuple(row) for row in cursor.fetchall()]
            except Exception:  # a statement that returns no rows
                return []

    def tip(self) -> tuple[int, str] | None:
        """The recorded audit tip."""
        if self.postgres:
            rows = self.sql("SELECT audit_tip_index, audit_tip_hash FROM aais_meta")
            index, entry_hash = rows[0]
            return None if index is None else (int(index), str(entry_hash))
        rows = self.sql("SELECT value FROM aais_meta WHERE key = 'audit_tip'")
        if not rows:
            return None
        found = json.loads(rows[0][0])
        return None if found is None else (int(found[0]), str(found[1]))

    def set_tip(self, tip: tuple[int, str]) -> None:
        """Record ``tip`` as the chain's tip."""
        if self.postgres:
            self.sql("UPDATE aais_meta SET audit_tip_index = ?, audit_tip_hash = ?", tip)
        else:
            self.sql("UPDATE aais_meta SET value = json_array(?, ?) WHERE key = 'audit_tip'", tip)

    def append_entry(self, kind: str, payload: dict[str, Any], occurred_at: str) -> int:
        """Append an audit entry after the recorded tip, hashed as the ledger would, and
        move the tip to it; its index."""
        tip = self.tip()
        index, prev = (0, GENESIS_HASH) if tip is None else (tip[0] + 1, tip[1])
        entry_hash = chain_hash(index, kind, occurred_at, payload, prev)
        self.sql(
            "INSERT INTO aais_audit (idx, kind, occurred_at, payload, prev_hash, entry_hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (index, kind, occurred_at, dump_json(payload), prev, entry_hash),
        )
        self.set_tip((index, entry_hash))
        return index
