"""One process of the MCP restart test: ``python mcp_restart_worker.py ask|approve DIR``.

Both phases build the same agent on DIR's SQLite checkpointer and SQLite ledger,
with MCP tools loaded from a notes server this process starts (DIR/notes).

``ask``      run until the gated ``write_note`` waits, print the pending
             ``approval.requested`` envelope as one JSON line, then die by SIGKILL
             (no cleanup, like a crashed host).
``approve``  a fresh process: find the waiting interrupt in the checkpoint, approve
             it as Alice and resume; print the resolution and the tool's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from mcp_agent import ALICE, mcp_client, notes_agent

from aais_langgraph import ApprovalAuthority, SqliteLedger, aresume_with_decisions, build_decision
from aais_langgraph.tools.mcp import get_mcp_tools

CONFIG: Any = {"configurable": {"thread_id": "mcp-restart"}}


async def run(phase: str, workdir: Path) -> dict[str, Any]:
    tools = await get_mcp_tools(mcp_client(workdir / "notes"))
    with SqliteLedger.from_path(workdir / "ledger.db") as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        async with AsyncSqliteSaver.from_conn_string(str(workdir / "checkpoints.db")) as saver:
            agent = notes_agent(tools, authority, saver)
            if phase == "ask":
                result = await agent.ainvoke({"messages": [("user", "add a todo")]}, CONFIG)
                [waiting] = result["__interrupt__"]
                return {"requested": waiting.value}
            [waiting] = (await agent.aget_state(CONFIG)).interrupts
            decision = build_decision(waiting.value, decision="approve", actor=ALICE)
            [resolved] = await aresume_with_decisions(
                agent, CONFIG, [decision], actor=ALICE, authority=authority
            )
            messages = (await agent.aget_state(CONFIG)).values["messages"]
            answers = {m.tool_call_id: m.content for m in messages if m.type == "tool"}
            return {"outcome": resolved.resolution.outcome, "answers": answers}


if __name__ == "__main__":
    phase, folder = sys.argv[1], Path(sys.argv[2])
    print(json.dumps(asyncio.run(run(phase, folder))), flush=True)
    if phase == "ask":
        os.kill(os.getpid(), signal.SIGKILL)
