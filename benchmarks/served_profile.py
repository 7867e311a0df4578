"""Count what one served approval costs the ledger: reads and writes per AG-UI approval.

Run with ``python benchmarks/served_profile.py [--approvals 50] [--answer agui|profile]``.

The app is :func:`aais_agui.create_app` in this process on the SQLite defaults
(LangGraph ``AsyncSqliteSaver``, the ledger in a sibling SQLite file), serving the
demo graph (``tests/agui/demo_graph.py``), driven through httpx's ASGI transport
one approval at a time, so every count belongs to one approval and the machine's
noise does not enter. An approval is the run that pauses plus the answer:
``--answer agui`` (default) resumes the thread with an AG-UI run carrying the
decided envelope in ``resume[]``; ``--answer profile`` posts the decision to
``/approvals/{id}/decisions`` and resumes the thread as the background resume does.
The app's lifespan does not run (no watcher polling the ledger between approvals):
the counts are the approval's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agui"))
from demo_graph import EffectLog, build_demo_graph  # noqa: E402

from aais_agui import bearer_token_authenticator, create_app  # noqa: E402
from aais_agui.mapping import resume_entry_for, run_agent_input  # noqa: E402
from aais_langgraph import ApprovalAuthority, build_decision  # noqa: E402
from aais_langgraph.ledger import SqliteLedger  # noqa: E402
from aais_langgraph.protocol import ApprovalRequested  # noqa: E402

TOKEN = "served-profile-token"
REQUESTER = {"Authorization": f"Bearer {TOKEN}"}
APPROVER = {"Authorization": f"Bearer {TOKEN}.approver"}
ACTOR = {"id": "approver", "type": "human"}


def count_ledger(counts: Counter[str]) -> None:
    """Count the SQLite ledger's reads and writes (every backend method goes through these)."""

    def counting(name: str, label: str) -> None:
        original = getattr(SqliteLedger, name)

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            counts[label] += 1
            return original(self, *args, **kwargs)

        setattr(SqliteLedger, name, wrapper)

    counting("_read", "ledger single reads")
    counting("_snapshot", "ledger snapshot reads")
    counting("_write", "ledger writes")


def count_served(counts: Counter[str]) -> None:
    """Count what the served layer asks of the rest per approval: checkpoint reads (the
    checkpointer's ``aget_tuple``), graph state reads (``aget_state``), hops to a worker
    thread (``asyncio.to_thread``, ``run_in_executor``) and AG-UI events encoded."""
    from ag_ui.encoder import EventEncoder
    from langgraph.pregel import Pregel

    def counting(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        if asyncio.iscoroutinefunction(original):

            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                counts[label] += 1
                return await original(*args, **kwargs)

            setattr(owner, name, awrapper)
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[label] += 1
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    counting(AsyncSqliteSaver, "aget_tuple", "checkpoint reads")
    counting(Pregel, "aget_state", "graph state reads")
    counting(asyncio, "to_thread", "worker thread hops (to_thread)")
    counting(asyncio.BaseEventLoop, "run_in_executor", "worker thread hops (all)")
    counting(EventEncoder, "encode", "AG-UI events encoded")

    validate = ApprovalRequested.from_data.__func__  # type: ignore[attr-defined]

    def validating(cls: Any, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, cls):
            counts["approval.requested validated (1: the client's)"] += 1
        return validate(cls, data, **kwargs)

    ApprovalRequested.from_data = classmethod(validating)  # type: ignore[method-assign,assignment]


async def agui_run(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """One AG-UI run; returns its terminal event."""
    last: dict[str, Any] = {}
    async with client.stream("POST", "/agent", json=body, headers=REQUESTER) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                last = json.loads(line[6:])
    return last


async def approval(
    client: httpx.AsyncClient, effects: EffectLog, thread_id: str, answer: str
) -> None:
    """Pause ``thread_id`` on its approval, answer it as ``answer`` says, and wait until
    its side effect ran."""
    paused = await agui_run(client, run_agent_input(thread_id, text=f"delete /srv/{thread_id}"))
    [interrupt] = paused["outcome"]["interrupts"]
    envelope = interrupt["metadata"]["aais"]
    decided = build_decision(envelope, decision="approve", actor=ACTOR)
    if answer == "agui":
        entry = resume_entry_for(decided, interrupt_id=interrupt["id"])
        body = run_agent_input(thread_id, resume=[entry.model_dump(by_alias=True, mode="json")])
        terminal = await agui_run(client, body)
        assert terminal.get("type") == "RUN_FINISHED", terminal
        return
    response = await client.post(
        f"/approvals/{envelope['request']['id']}/decisions",
        json=decided.to_json(),
        headers=APPROVER,
    )
    assert response.status_code == 200, response.text
    for _ in range(2000):
        if thread_id in {thread for thread, _, _ in effects.list()}:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the background resume did not run the side effect")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--approvals", type=int, default=50)
    parser.add_argument("--answer", choices=["agui", "profile"], default="agui")
    parser.add_argument(
        "--stock",
        action="store_true",
        help="count two runs of the stock agent (schema keys once) per approval instead",
    )
    args = parser.parse_args()
    if args.stock:
        await stock_main(args.approvals)
        return
    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="served_profile_") as tmp:
        folder = Path(tmp)
        ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        authenticate = bearer_token_authenticator(
            {TOKEN: {"id": "requester", "type": "human"}, f"{TOKEN}.approver": ACTOR}
        )
        async with AsyncSqliteSaver.from_conn_string(str(folder / "checkpoints.db")) as saver:
            effects = EffectLog(folder / "effects.db")
            graph = build_demo_graph(effects, saver)
            app = create_app(graph, authority=authority, authenticate=authenticate)
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
            async with client:
                for i in range(3):
                    await approval(client, effects, f"warm-{i}", args.answer)
                count_ledger(counts)
                count_served(counts)
                for i in range(args.approvals):
                    await approval(client, effects, f"served-{i}", args.answer)
    print(f"served profile: {args.approvals} approvals (answer: {args.answer}), SQLite")
    for label, n in sorted(counts.items()):
        print(f"  {label:<28}{n / args.approvals:>7.2f} per approval")


async def stock_main(approvals: int) -> None:
    """The baseline's counts: the stock agent serving the graph without approvals, its
    schema keys worked out once (``demo_server.py --plain --schema-keys-once``), two runs
    counted per approval."""
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    keys: dict[str, Any] = {}

    class SchemaKeysOnce(LangGraphAgent):  # type: ignore[misc]
        def get_schema_keys(self, config: Any) -> Any:
            if not keys:
                keys.update(super().get_schema_keys(config))
            return {name: list(found) for name, found in keys.items()}

    counts: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="served_profile_") as tmp:
        folder = Path(tmp)
        async with AsyncSqliteSaver.from_conn_string(str(folder / "checkpoints.db")) as saver:
            graph = build_demo_graph(EffectLog(folder / "effects.db"), saver, gated=False)
            app = FastAPI()
            add_langgraph_fastapi_endpoint(app, SchemaKeysOnce(name="plain", graph=graph), "/agent")
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1"
            ) as client:
                for i in range(3):
                    await agui_run(client, run_agent_input(f"warm-{i}", text=f"delete /srv/{i}"))
                count_served(counts)
                for i in range(2 * approvals):
                    await agui_run(client, run_agent_input(f"stock-{i}", text=f"delete /srv/{i}"))
    print(f"stock agent (schema keys once): {2 * approvals} runs counted as {approvals} approvals")
    for label, n in sorted(counts.items()):
        print(f"  {label:<28}{n / approvals:>7.2f} per approval (two runs)")


if __name__ == "__main__":
    asyncio.run(main())
