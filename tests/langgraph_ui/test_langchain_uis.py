"""Agent Chat UI and Agent Inbox against a real ``langgraph dev`` serving ``ApprovalMiddleware``.

``langgraph dev`` (langgraph-cli / langgraph-api) serves ``app/agent_graph.py`` (an agent
moved from HITL, nothing else changed) with the example's custom auth
(examples/langgraph_server/auth.py: bearer token -> user) and a SQLite ledger. The real
``@langchain/langgraph-sdk`` from npm (``ui_client.mjs``) drives it exactly as the two UIs
do: their interrupt checks decide whether a card is drawn, their resume payloads answer
it. The ledger and the tool's log say what was recorded, as whom, and what ran. The
server runs without ``--allow-blocking``: a blocking call on its event loop fails the run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.ledger import open_ledger
from aais_langgraph.protocol.extensions import RESOLVED_BY_EXTENSION
from support.langgraph_dev import langgraph_dev, server_env

pytestmark = pytest.mark.timeout(240)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLIENT = HERE / "ui_client.mjs"
STARTUP_TIMEOUT = 60.0
TOKENS = "alice-token=alice,bob-token=bob"


class Served:
    """The running server, its folder (ledger, tool log, server log) and the UI client."""

    def __init__(self, url: str, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.url = url
        self.folder = folder
        self.process = process
        self.ledger_url = str(folder / "approvals.db")

    def ui(self, step: str, token: str | None = "alice-token", **fields: Any) -> dict[str, Any]:
        args = {"url": self.url, "token": token, "graph": "agent", "step": step, **fields}
        done = subprocess.run(
            ["node", str(CLIENT), json.dumps(args)],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def effects(self) -> list[str]:
        path = self.folder / "effects.log"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def events(self) -> list[dict[str, Any]]:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            return list(ledger.events_after(0, limit=10_000))

    def pending(self) -> list[str]:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            return [stored.request_id for stored in ledger.list_pending()]

    def resolution(self, request_id: str) -> dict[str, Any]:
        [found] = [
            e["resolution"]
            for e in self.events()
            if e["type"] == "approval.resolved" and e["resolution"]["request_id"] == request_id
        ]
        return dict(found)

    def decided_actor(self, request_id: str) -> dict[str, Any]:
        [found] = [
            e["decision"]["actor"]
            for e in self.events()
            if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id
        ]
        return dict(found)

    def log(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if not (HERE / "node_modules" / "@langchain" / "langgraph-sdk").exists():
        pytest.fail(f"run: npm ci --prefix {HERE.relative_to(ROOT)}")
    folder = tmp_path_factory.mktemp("langgraph_ui") / "app"
    shutil.copytree(HERE / "app", folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "examples" / "langgraph_server" / "auth.py", folder / "auth.py")
    env = server_env(
        {
            "AAIS_LEDGER_URL": str(folder / "approvals.db"),
            "AAIS_EXAMPLE_EFFECTS": str(folder / "effects.log"),
            "AAIS_EXAMPLE_TOKENS": TOKENS,
            "PYTHONPATH": str(ROOT),
        }
    )
    with langgraph_dev(folder, env, startup_timeout=STARTUP_TIMEOUT) as (url, process):
        yield Served(url, folder, process)


def _paused(served: Served, to: str) -> tuple[str, dict[str, Any]]:
    """A new thread whose agent waits for approval to email ``to``: its id and its cards."""
    started = served.ui("start", message=to)
    assert "thrown" not in started and started["run"]["errors"] == [], started
    cards = served.ui("cards", thread_id=started["thread_id"])
    return started["thread_id"], cards


def _request_id(cards: dict[str, Any]) -> str:
    return str(cards["value"]["request"]["id"])


def _ran(served: Served, to: str) -> int:
    return served.effects().count(f"send_email {to}")


def test_both_uis_recognise_the_card(served: Served) -> None:
    _, cards = _paused(served, "card@example.com")
    assert cards["agent_chat_ui_card"] is True
    assert cards["agent_inbox_card"]["action_request"] == {
        "action": "send_email",
        "args": {"to": "card@example.com"},
    }
    assert cards["agent_inbox_card"]["config"]["allow_accept"] is True
    assert cards["value"]["type"] == "approval.requested"
    assert _request_id(cards) in served.pending()


def test_agent_chat_ui_approve_runs_the_tool_once_as_the_tokens_user(served: Served) -> None:
    thread_id, cards = _paused(served, "approve@example.com")
    resumed = served.ui("chat-ui-resume", thread_id=thread_id, decision={"type": "approve"})
    assert resumed["run"]["errors"] == [], resumed
    assert _ran(served, "approve@example.com") == 1
    request_id = _request_id(cards)
    assert served.resolution(request_id)["outcome"] == "approved"
    assert served.decided_actor(request_id)["id"] == "alice"
    again = served.ui("chat-ui-resume", thread_id=thread_id, decision={"type": "approve"})
    assert "thrown" not in again
    assert _ran(served, "approve@example.com") == 1


def test_agent_chat_ui_edit_runs_the_edited_call_once(served: Served) -> None:
    thread_id, cards = _paused(served, "edit@example.com")
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "ed@x.org"}}}
    resumed = served.ui("chat-ui-resume", thread_id=thread_id, decision=edit, token="bob-token")
    assert resumed["run"]["errors"] == [], resumed
    assert (_ran(served, "edit@example.com"), _ran(served, "ed@x.org")) == (0, 1)
    original = served.resolution(_request_id(cards))
    assert original["outcome"] == "cancelled"
    assert original["extensions"][RESOLVED_BY_EXTENSION]["id"] == "bob"
    [successor] = [
        e["request"]["id"]
        for e in served.events()
        if e["type"] == "approval.requested"
        and e["request"]["extensions"].get("aais-langgraph.org/edit", {}).get("supersedes")
        == _request_id(cards)
    ]
    assert served.decided_actor(successor)["id"] == "bob"


def test_agent_chat_ui_reject_tells_the_model_and_runs_nothing(served: Served) -> None:
    thread_id, cards = _paused(served, "reject@example.com")
    reject = {"type": "reject", "message": "wrong person"}
    resumed = served.ui("chat-ui-resume", thread_id=thread_id, decision=reject)
    assert resumed["run"]["errors"] == [], resumed
    assert _ran(served, "reject@example.com") == 0
    assert served.resolution(_request_id(cards))["outcome"] == "denied"
    assert served.decided_actor(_request_id(cards))["id"] == "alice"
    messages = served.ui("state", thread_id=thread_id)["messages"]
    [tool] = [m for m in messages if m["type"] == "tool"]
    assert tool["status"] == "error" and tool["content"].endswith("with reason: wrong person")


def test_agent_inbox_response_is_the_tools_result(served: Served) -> None:
    thread_id, cards = _paused(served, "respond@example.com")
    response = {"type": "response", "args": "Already sent it myself."}
    resumed = served.ui("inbox-resume", thread_id=thread_id, response=response)
    assert resumed["run"]["errors"] == [], resumed
    assert _ran(served, "respond@example.com") == 0
    assert served.resolution(_request_id(cards))["outcome"] == "denied"
    assert served.decided_actor(_request_id(cards))["id"] == "alice"
    messages = served.ui("state", thread_id=thread_id)["messages"]
    [tool] = [m for m in messages if m["type"] == "tool"]
    assert (tool["status"], tool["content"]) == ("success", "Already sent it myself.")


def test_agent_inbox_accept_runs_the_tool_once(served: Served) -> None:
    thread_id, cards = _paused(served, "accept@example.com")
    card = cards["agent_inbox_card"]
    response = {"type": "accept", "args": card["action_request"]}
    resumed = served.ui("inbox-resume", thread_id=thread_id, response=response, token="bob-token")
    assert resumed["run"]["errors"] == [], resumed
    assert _ran(served, "accept@example.com") == 1
    assert served.decided_actor(_request_id(cards))["id"] == "bob"


def test_an_answer_for_a_changed_action_is_refused(served: Served) -> None:
    thread_id, cards = _paused(served, "changed@example.com")
    shown = {"action": "send_email", "args": {"to": "someone-else@example.com"}}
    resumed = served.ui(
        "inbox-resume", thread_id=thread_id, response={"type": "accept", "args": shown}
    )
    assert [e.get("error") for e in resumed["run"]["errors"]] == ["AnswerShapeRefused"], resumed
    assert "aais.unknown_interrupt" in resumed["run"]["errors"][0]["message"]
    assert _ran(served, "changed@example.com") == 0
    assert _request_id(cards) in served.pending()
    assert served.ui("cards", thread_id=thread_id)["interrupt_ids"] == cards["interrupt_ids"]


def test_an_unauthenticated_answer_is_refused_with_nothing_recorded(served: Served) -> None:
    thread_id, cards = _paused(served, "anonymous@example.com")
    before = len(served.events())
    resumed = served.ui(
        "chat-ui-resume", thread_id=thread_id, decision={"type": "approve"}, token=None
    )
    assert resumed["thrown"]["status"] == 401
    assert len(served.events()) == before
    assert _request_id(cards) in served.pending()
    assert _ran(served, "anonymous@example.com") == 0


def test_a_malformed_answer_is_refused_with_a_catalogue_code(served: Served) -> None:
    thread_id, cards = _paused(served, "malformed@example.com")
    resumed = served.ui("chat-ui-resume", thread_id=thread_id, decision={"type": "maybe"})
    [error] = resumed["run"]["errors"]
    assert error["error"] == "AnswerShapeRefused" and "aais.invalid_resume" in error["message"]
    assert "ValidationError" not in json.dumps(error)
    assert _request_id(cards) in served.pending()
    done = served.ui("chat-ui-resume", thread_id=thread_id, decision={"type": "approve"})
    assert done["run"]["errors"] == [], done
    assert _ran(served, "malformed@example.com") == 1


def test_agent_chat_ui_mark_as_resolved_cancels_as_the_user_and_runs_nothing(
    served: Served,
) -> None:
    thread_id, cards = _paused(served, "resolved@example.com")
    resolved = served.ui("chat-ui-mark-resolved", thread_id=thread_id, token="bob-token")
    assert "thrown" not in resolved and resolved["run"]["errors"] == [], resolved
    assert _ran(served, "resolved@example.com") == 0
    assert _request_id(cards) not in served.pending()
    cancelled = served.resolution(_request_id(cards))
    assert cancelled["outcome"] == "cancelled"
    assert cancelled["message"].startswith("Marked as resolved in Agent Chat UI")
    assert cancelled["extensions"][RESOLVED_BY_EXTENSION]["id"] == "bob"
    after = served.ui("state", thread_id=thread_id)
    assert after["interrupt_ids"] == []
    [tool] = [m for m in after["messages"] if m["type"] == "tool"]
    assert tool["status"] == "error"


def test_an_approval_sent_after_the_call_changed_runs_nothing(served: Served) -> None:
    thread_id, shown = _paused(served, "shown@example.com")
    changed = served.ui(
        "change-call",
        thread_id=thread_id,
        arguments={"to": "swapped@example.com"},
        token="bob-token",
    )
    assert "thrown" not in changed and changed["interrupt_ids"] == [], changed
    # Agent Chat UI still shows the card for shown@example.com; alice approves it.
    resumed = served.ui("chat-ui-resume", thread_id=thread_id, decision={"type": "approve"})
    [error] = resumed["run"]["errors"]
    assert error["error"] == "AnswerShapeRefused" and "aais.stale" in error["message"], resumed
    assert (_ran(served, "shown@example.com"), _ran(served, "swapped@example.com")) == (0, 0)
    events = served.events()
    asked = {
        e["request"]["id"]
        for e in events
        if e["type"] == "approval.requested" and e["request"]["origin"]["session_id"] == thread_id
    }
    assert _request_id(shown) in asked and len(asked) == 2  # and the changed one, never shown
    approvals = [
        e
        for e in events
        if (e["type"] == "approval.decided" and e["decision"]["request_id"] in asked)
        or (
            e["type"] == "approval.resolved"
            and e["resolution"]["request_id"] in asked
            and e["resolution"]["outcome"] == "approved"
        )
    ]
    assert approvals == []


def test_no_answer_blocked_the_servers_event_loop(served: Served) -> None:
    """Runs last: every answer above went through the server's blocking-call detector."""
    assert "BlockingError" not in (served.folder / "server.log").read_text(errors="replace")
