"""The demo's deterministic fake chat model: reads the user's words, proposes tool calls.

No network and no randomness. Turn *n* of a conversation (the number of AI
messages so far) always gets the same answer, so a replayed or resumed run sees
the same tool calls. What it proposes follows the last user message:

- ``run`` / ``shell`` / ``command`` / a `backticked command` -> ``run_shell``;
- ``write`` / ``save`` / ``create`` (a file)                  -> ``write_file``;
- ``email`` / ``mail`` / an address                          -> ``send_email``
  (with an opaque credential reference, never a secret);
- after tool results, a short report of what ran and what was refused.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

SMTP_CREDENTIAL_REF = "secret://smtp/password"
"""The opaque credential reference the email tool receives; the relay resolves it."""

HELP = (
    'I\'m the demo agent. Ask me to run a shell command ("run the tests" or '
    '"run `ls -la`"), write a file ("write notes.md: ship it"), or send an email '
    '("email alice@example.com the status"). Each action waits for your approval.'
)

_SHELL = re.compile(r"\b(run|shell|command|execute)\b|`[^`]+`", re.IGNORECASE)
_WRITE = re.compile(r"\b(write|save|create)\b", re.IGNORECASE)
_EMAIL = re.compile(r"\b(e-?mail|mail)\b|[\w.+-]+@[\w-]+\.[\w.-]+", re.IGNORECASE)
_ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_BACKTICKS = re.compile(r"`([^`]+)`")
_FILE_NAME = re.compile(r"[\w./-]+\.(?:md|txt|json|csv|log|ya?ml|toml|py|html)\b", re.IGNORECASE)


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [part.get("text", "") if isinstance(part, dict) else str(part) for part in content]
    return " ".join(str(part) for part in parts)


def _shell_command(text: str) -> str:
    quoted = _BACKTICKS.search(text)
    if quoted:
        return quoted.group(1).strip()
    return "pytest -q" if re.search(r"\btests?\b", text, re.IGNORECASE) else "ls -la"


def _file_call(text: str) -> dict[str, Any]:
    name = _FILE_NAME.search(text)
    _, colon, rest = text.partition(":")
    body = rest.strip() if colon and rest.strip() else "Notes from the demo\n- approvals work\n"
    return {"path": name.group(0) if name else "notes.md", "content": body}


def _email_call(text: str) -> dict[str, Any]:
    address = _ADDRESS.search(text)
    return {
        "to": address.group(0) if address else "team@example.com",
        "subject": "Status update from the demo agent",
        "body": f"Hello,\n\nAs requested: {text.strip()}\n\n-- the demo agent",
        "smtp_password": SMTP_CREDENTIAL_REF,
    }


def propose_calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls (name, arguments) the demo agent proposes for a user message."""
    calls: list[tuple[str, dict[str, Any]]] = []
    if _SHELL.search(text):
        calls.append(("run_shell", {"command": _shell_command(text)}))
    if _WRITE.search(text):
        calls.append(("write_file", _file_call(text)))
    if _EMAIL.search(text):
        calls.append(("send_email", _email_call(text)))
    return calls


_INTENT = {
    "run_shell": "run `{command}`",
    "write_file": "write {path}",
    "send_email": "send an email to {to}",
}


def _report(results: list[ToolMessage]) -> str:
    done = [str(result.name) for result in results if result.status != "error"]
    lines = [f"Done: {', '.join(done)} finished."] if done else []
    for result in results:
        if result.status == "error":
            lines.append(f"{result.name} was not run. {_text(result)}")
    return "\n".join(lines) if lines else "Nothing happened."


class DemoChatModel(FakeMessagesListChatModel):
    """A chat model that reacts to the user's words, deterministically (see module doc).

    ``bind_tools`` returns the model itself: the demo's tools are fixed.
    """

    responses: list[BaseMessage] = []

    @property
    def _llm_type(self) -> str:
        return "aais-demo"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.respond(messages))])

    def respond(self, messages: list[BaseMessage]) -> AIMessage:
        """The answer to the conversation so far."""
        turn = sum(isinstance(message, AIMessage) for message in messages)
        anchor = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        seed = f"{turn}:{anchor.id if anchor is not None and anchor.id else ''}"
        message_id = f"demo-ai-{turn}-{hashlib.sha256(seed.encode()).hexdigest()[:10]}"
        trailing: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            trailing.insert(0, message)
        if trailing:
            return AIMessage(content=_report(trailing), id=message_id)
        text = _text(anchor) if anchor is not None else ""
        calls = propose_calls(text)
        if not calls:
            return AIMessage(content=HELP, id=message_id)
        intents = [_INTENT[name].format(**args) for name, args in calls]
        needs = "It needs" if len(calls) == 1 else "Each needs"
        content = "I'd like to " + ", then ".join(intents) + f". {needs} your approval."
        tool_calls = [
            {"name": name, "args": args, "id": f"call_{turn}_{index}_{name}", "type": "tool_call"}
            for index, (name, args) in enumerate(calls)
        ]
        return AIMessage(content=content, tool_calls=tool_calls, id=message_id)

    def bind_tools(self, tools: Any, **kwargs: Any) -> DemoChatModel:
        return self
