"""An agent whose MCP tool waits for an AAIS approval: load the tools, ask, answer, run.

    pip install -e ".[mcp,sqlite]"
    python examples/mcp/agent.py [--deny] [--dir DIR]

1. ``MultiServerMCPClient`` starts ``notes_server.py`` over stdio; ``get_mcp_tools``
   marks each tool with its server (kind ``mcp.tool.call``, resource
   ``mcp://notes/TOOL``), so the approval card says which server and tool run.
2. ``create_agent`` with ``ApprovalMiddleware`` gating ``write_note`` (``read_note``
   runs freely) and a scripted fake model from langchain-core proposing the calls.
   Checkpoints and the approval ledger are SQLite files in DIR: a pending approval
   survives a restart (run ``aais-langgraph --db DIR/approvals.db pending`` while
   it waits, from another terminal).
3. The run pauses on an ``approval.requested`` interrupt; the script prints it.
4. Alice approves (or denies) it, bound to its request id and action digest; the
   server's call log shows that only an approved call reached the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from aais_langgraph import ApprovalAuthority, SqliteLedger, aresume_with_decisions, build_decision
from aais_langgraph.tools import ApprovalMiddleware
from aais_langgraph.tools.mcp import get_mcp_tools

SERVER = Path(__file__).resolve().parent / "notes_server.py"
ALICE = {"id": "alice", "type": "human"}


class ScriptedModel(FakeMessagesListChatModel):
    """A deterministic stand-in for an LLM: turn n answers with responses[n]."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        reply = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def model() -> ScriptedModel:
    def call(tool: str, call_id: str, **args: str) -> dict[str, Any]:
        return {"name": tool, "args": args, "id": call_id, "type": "tool_call"}

    proposal = AIMessage(
        content="",
        tool_calls=[
            call("read_note", "call_read", name="todo.md"),
            call("write_note", "call_write", name="todo.md", text="- water the plants\n"),
        ],
    )
    return ScriptedModel(responses=[proposal, AIMessage(content="Finished.")])


def notes_client(notes: Path) -> MultiServerMCPClient:
    """The MCP server as a stdio subprocess (each tool call opens a fresh session)."""
    command = {"command": sys.executable, "args": [str(SERVER), str(notes)]}
    return MultiServerMCPClient({"notes": {"transport": "stdio", **command}})


async def main(workdir: Path, decision: str) -> None:
    notes = workdir / "notes"
    tools = await get_mcp_tools(notes_client(notes))
    with SqliteLedger.from_path(workdir / "approvals.db") as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        async with AsyncSqliteSaver.from_conn_string(str(workdir / "checkpoints.db")) as saver:
            agent = create_agent(
                model(),
                tools=tools,
                middleware=[ApprovalMiddleware({"write_note": True}, authority=authority)],
                checkpointer=saver,
            )
            config = {"configurable": {"thread_id": "notes-1"}}
            result = await agent.ainvoke({"messages": [("user", "Add a todo")]}, config)

            [pending] = result["__interrupt__"]  # the approval.requested envelope
            action = pending.value["request"]["action"]
            print(f"waiting: {action['kind']} · {action['name']} · {action['resource']}")
            print(f"  {action['summary']}\n  arguments {json.dumps(action['arguments'])}")

            answer = build_decision(pending.value, decision=decision, actor=ALICE)
            [resolved] = await aresume_with_decisions(
                agent, config, [answer], actor=ALICE, authority=authority
            )
            print(f"resolution: {resolved.resolution.outcome}")
            final = await agent.aget_state(config)
            print(f"agent: {final.values['messages'][-1].content}")
    print(f"server call log ({notes / 'calls.jsonl'}):")
    print((notes / "calls.jsonl").read_text(encoding="utf-8"), end="")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deny", action="store_true", help="deny instead of approving")
    parser.add_argument("--dir", type=Path, help="state folder (default: a new temp folder)")
    options = parser.parse_args()
    workdir = options.dir or Path(tempfile.mkdtemp(prefix="aais-mcp-"))
    workdir.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(workdir, "deny" if options.deny else "approve"))
