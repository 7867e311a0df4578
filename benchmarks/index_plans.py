"""Which index each query on the requests table reads: ``EXPLAIN QUERY PLAN`` on SQLite.

Run with ``python benchmarks/index_plans.py``. It fills a SQLite ledger with a few
hundred requests (several sessions, action kinds and names, requesters and threads,
most of them resolved), records every statement the ledger runs against
``aais_requests`` while it serves each listing and lookup that reads that table
(pending listings whole, by session, by thread, expired; a viewer's selections by
kind, by name, by risk, by requester; the bounds' counts; a thread's requests; one
request), explains each, and prints which index it reads. Then it lists every index of
``aais_requests`` with the statements that read it; an index no statement reads is
storage that every request pays for on each write.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _fill(ledger: Any, rows: int = 400) -> Any:
    import bench_gate
    from aais_langgraph import ApprovalAuthority, build_decision
    from aais_langgraph.authority import RequestLimits

    authority = ApprovalAuthority(ledger, limits=RequestLimits.unbounded())
    for i in range(rows):
        action = bench_gate.shell_action(f"ls {i}")
        action["kind"] = f"kind.{i % 4}"
        action["name"] = f"tool.{i % 7}"
        requested = authority.request(
            action,
            origin={"harness": "bench", "session_id": f"s{i % 100}"},
            thread_id=f"t{i % 50}",
            context={"requester": f"user{i % 3}"},
        )
        if i % 4:
            authority.decide(build_decision(requested, decision="deny", actor=bench_gate.ACTOR))
    return authority


def _readers(ledger: Any) -> list[tuple[str, Any]]:
    """Every ledger call that reads ``aais_requests``, named."""
    from aais_langgraph.ledger import ActionPattern, PendingSelection

    def selection(**pattern: Any) -> PendingSelection:
        return PendingSelection(actions=(ActionPattern(**pattern),))

    return [
        ("list_pending_rows (every pending row)", lambda: ledger.list_pending_rows()),
        ("list_pending_rows (one session)", lambda: ledger.list_pending_rows(session_id="s1")),
        (
            "list_pending_rows (kinds)",
            lambda: ledger.list_pending_rows(selection=selection(kinds=("kind.1",))),
        ),
        (
            "list_pending_rows (kind prefix)",
            lambda: ledger.list_pending_rows(selection=selection(kinds=("kind.*",))),
        ),
        (
            "list_pending_rows (names)",
            lambda: ledger.list_pending_rows(selection=selection(names=("tool.2",))),
        ),
        (
            "list_pending_rows (risks)",
            lambda: ledger.list_pending_rows(selection=selection(risks=frozenset({"high"}))),
        ),
        (
            "list_pending_rows (requester)",
            lambda: ledger.list_pending_rows(selection=PendingSelection(requester="user1")),
        ),
        (
            "list_pending_rows (kinds or requester)",
            lambda: ledger.list_pending_rows(
                selection=PendingSelection(
                    actions=(ActionPattern(kinds=("kind.2",)),), requester="user2"
                )
            ),
        ),
        ("list_pending (every)", lambda: ledger.list_pending()),
        ("list_pending (thread)", lambda: ledger.list_pending(thread_id="t3")),
        ("list_pending (session)", lambda: ledger.list_pending(session_id="s2")),
        (
            "list_pending (expired)",
            lambda: ledger.list_pending(expires_before=time.time() + 10**6),
        ),
        ("count_pending (session)", lambda: ledger.count_pending(session_id="s1", limit=50)),
        ("count_pending (requester)", lambda: ledger.count_pending(requester="user1", limit=50)),
        ("requests_of_thread", lambda: ledger.requests_of_thread("t4")),
        ("get_request", lambda: ledger.get_request("apr_none")),
    ]


def sqlite_plans() -> None:
    from aais_langgraph.ledger import SqliteLedger

    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    with tempfile.TemporaryDirectory(prefix="index_plans_") as tmp:
        path = Path(tmp) / "ledger.db"
        sqlite3.connect = traced  # type: ignore[assignment]
        try:
            ledger_context = SqliteLedger.from_path(path)
            ledger = ledger_context.__enter__()
        finally:
            sqlite3.connect = connect
        try:
            ledger.setup()
            _fill(ledger)
            reads: dict[str, list[str]] = {}
            for name, call in _readers(ledger):
                statements.clear()
                call()
                reads[name] = [s for s in statements if "aais_requests" in s]
            plans = sqlite3.connect(path)
            indexes = [
                row[0]
                for row in plans.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'index' "
                    "AND tbl_name = 'aais_requests'"
                )
            ]
            used: dict[str, list[str]] = defaultdict(list)
            print("SQLite: the index each statement on aais_requests reads")
            for name, sqls in reads.items():
                for sql in sqls:
                    if not sql.lstrip().upper().startswith("SELECT"):
                        continue
                    plan = [row[3] for row in plans.execute("EXPLAIN QUERY PLAN " + sql)]
                    found = sorted(
                        {m for line in plan for m in re.findall(r"INDEX (\w+)", line)}
                        | {"(primary key)" for line in plan if "PRIMARY KEY" in line}
                        | {
                            "(table scan)"
                            for line in plan
                            if re.search(r"SCAN aais_requests\b(?! USING)", line)
                        }
                    )
                    for index in found:
                        used[index].append(name)
                    print(f"  {name:<42} {', '.join(found) or '-'}")
            print("\nSQLite: indexes of aais_requests and the listings that read them")
            for index in indexes:
                users = sorted(set(used.get(index, [])))
                print(f"  {index:<40} {', '.join(users) if users else 'NOT READ'}")
            plans.close()
        finally:
            ledger_context.__exit__(None, None, None)


_PG_INDEX = r"(?:Index (?:Only )?Scan using|Bitmap Index Scan on) (\w+)"


def postgres_plans(rows: int) -> None:
    """The same on the tests' throwaway Postgres server, with ``rows`` requests (and
    ``ANALYZE``) so the planner's choices are those of a ledger with history."""
    import bench_distributed
    from aais_langgraph.ledger import postgres as pg
    from aais_langgraph.ledger._sql import SqlBackend, sql_for

    with bench_distributed.throwaway_cluster() as cluster:
        url = cluster.create_database("plans")
        with pg.PostgresLedger.from_conn_string(url) as ledger:
            ledger.setup()
            _fill(ledger, rows)
            with ledger._read() as cur:
                cur.execute("ANALYZE")
            captured: list[tuple[str, Any]] = []
            run = SqlBackend._run

            def traced(self: Any, cur: Any, sql: str, params: Any = ()) -> Any:
                captured.append((sql, params))
                return run(self, cur, sql, params)

            SqlBackend._run = traced  # type: ignore[method-assign]
            reads: dict[str, list[tuple[str, Any]]] = {}
            try:
                for name, call in _readers(ledger):
                    captured.clear()
                    call()
                    reads[name] = [c for c in captured if "aais_requests" in c[0]]
            finally:
                SqlBackend._run = run  # type: ignore[method-assign]
            with ledger._read() as cur:
                cur.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'aais_requests'")
                indexes = [row[0] for row in cur.fetchall()]
                used: dict[str, list[str]] = defaultdict(list)
                print(f"\nPostgres ({rows} requests, ANALYZE): the index each statement reads")
                for name, sqls in reads.items():
                    for sql, params in sqls:
                        if not sql.lstrip().upper().startswith("SELECT"):
                            continue
                        cur.execute("EXPLAIN " + sql_for(sql, ledger.mark), params)
                        plan = [row[0] for row in cur.fetchall()]
                        found = sorted(
                            {m for line in plan for m in re.findall(_PG_INDEX, line)}
                            | {
                                "(table scan)"
                                for line in plan
                                if "Seq Scan on aais_requests" in line
                            }
                        )
                        for index in found:
                            used[index].append(name)
                        print(f"  {name:<42} {', '.join(found) or '-'}")
            print("\nPostgres: indexes of aais_requests and the listings that read them")
            for index in indexes:
                users = sorted(set(used.get(index, [])))
                print(f"  {index:<40} {', '.join(users) if users else 'NOT READ'}")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="Postgres too (throwaway)")
    parser.add_argument("--rows", type=int, default=2000, help="requests (Postgres)")
    args = parser.parse_args()
    sqlite_plans()
    if args.postgres:
        postgres_plans(args.rows)


if __name__ == "__main__":
    main()
