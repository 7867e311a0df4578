"""An approval whose run died while it may have been executing is listed unknown at once."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

from aais_langgraph.cli import main as cli_main
from aais_langgraph.gate import unknown_executions
from aais_langgraph.ledger.executions import claim_change

from .support import HUMAN, Backend, Effects, config, decide, gated_graph, paused, requested_of

_PRINT_HOLDER = "from aais_langgraph.authority import new_holder; print(new_holder())"


def _approved(backend: Backend, effects: Effects) -> str:
    graph = gated_graph(backend, effects)
    (pending,) = paused(graph.invoke({"command": "ls -la"}, config("t-1")))
    requested = requested_of(pending)
    backend.authority.decide(decide(requested), actor=HUMAN)
    return requested.request.id


def _claim(backend: Backend, request_id: str, holder: str, *, ttl: float, at: float) -> None:
    change = claim_change(request_id, holder, thread_id="t-1", ttl=ttl, now=at, retry=False)
    backend.authority.ledger.update_execution(request_id, change)


def test_a_claim_past_its_lifetime_is_listed_unknown_before_any_rerun(
    backend: Backend, effects: Effects
) -> None:
    request_id = _approved(backend, effects)
    _claim(backend, request_id, "holder_on_another_host", ttl=10.0, at=time.time() - 200)

    assert [record.request_id for record in unknown_executions(backend.authority)] == [request_id]
    assert [entry["request_id"] for entry in backend.authority.unknown_executions()] == [request_id]


def test_a_claim_of_a_dead_local_process_is_listed_unknown_at_once(
    backend: Backend, effects: Effects
) -> None:
    request_id = _approved(backend, effects)
    dead = subprocess.run(
        [sys.executable, "-c", _PRINT_HOLDER], capture_output=True, text=True, timeout=60
    ).stdout.strip()
    _claim(backend, request_id, dead, ttl=600.0, at=time.time())

    assert [record.request_id for record in unknown_executions(backend.authority)] == [request_id]


def test_a_live_claim_is_not_listed(backend: Backend, effects: Effects) -> None:
    request_id = _approved(backend, effects)
    _claim(backend, request_id, "holder_on_another_host", ttl=600.0, at=time.time())

    assert unknown_executions(backend.authority) == []
    assert backend.authority.unknown_executions() == []


def test_the_cli_lists_a_dead_claim_at_once(sqlite_backend: Backend, effects: Effects) -> None:
    request_id = _approved(sqlite_backend, effects)
    _claim(sqlite_backend, request_id, "holder_on_another_host", ttl=10.0, at=time.time() - 200)
    assert isinstance(sqlite_backend.path, Path)

    listed = io.StringIO()
    cli_main(["--db", str(sqlite_backend.path), "unknown"], stdin=io.StringIO(""), stdout=listed)

    assert request_id in listed.getvalue() and "1 outcome unknown" in listed.getvalue()
