"""The demo's tools: harmless simulations that record what they would do.

- ``run_shell`` executes nothing; it records the command and answers with a
  simulated result;
- ``write_file`` really writes, but only inside the demo workspace directory;
- ``send_email`` sends nothing; it appends the message to ``outbox.jsonl``.
  Its credential is an opaque reference (``secret://...``), which the approval
  shows as redacted with a binding hint; no secret is ever an argument.

Every execution is appended to ``actions.jsonl`` in the workspace, so a test
(or a curious user) can see exactly what ran and how often. Each line carries the
call's :func:`~aais_langgraph.gate.approval_key`; a call whose key is already
there is not performed again (the tools are declared ``idempotent``, so a run
recovered after a crash re-runs them and this is what keeps it to once), as a
real tool with external effects should deduplicate.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, tool

from aais_langgraph.gate import approval_key
from aais_langgraph.tools import command_session_scope

from .model import SMTP_CREDENTIAL_REF


class DemoWorkspace:
    """The directory the demo tools may touch, and the log of what they did."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()

    @property
    def log_path(self) -> Path:
        return self.root / "actions.jsonl"

    def record(self, tool_name: str, arguments: dict[str, Any], **extra: Any) -> None:
        """Append one executed action to ``actions.jsonl``."""
        entry = {"at": time.time(), "tool": tool_name, "arguments": arguments, **extra}
        with self._lock, self.log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")

    def once(self, tool_name: str, arguments: dict[str, Any], perform: Callable[[], str]) -> str:
        """Perform an approved call once per approval: keyed by ``approval_key()``, a call
        already recorded returns its recorded result instead of acting again."""
        key = approval_key()
        with self._lock:
            for entry in self.executed():
                if entry.get("key") == key:
                    return str(entry.get("result", ""))
            result = perform()
            self.record(tool_name, arguments, key=key, result=result)
            return result

    def executed(self) -> list[dict[str, Any]]:
        """Every action the tools executed, oldest first."""
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def inside(self, relative: str) -> Path:
        """``relative`` resolved inside the workspace; ValueError if it would leave it."""
        target = (self.root / relative).resolve()
        if target == self.root or self.root not in target.parents:
            raise ValueError("the demo only writes files inside its workspace")
        return target


def demo_tools(workspace: DemoWorkspace) -> list[BaseTool]:
    """``run_shell``, ``write_file`` and ``send_email`` bound to ``workspace``."""

    @tool
    def run_shell(command: str) -> str:
        """Run a shell command in the demo workspace (simulated: nothing is executed)."""

        def simulate() -> str:
            if command.startswith("ls"):
                root = workspace.root
                names = sorted(p.name for p in root.iterdir() if not p.name.startswith("."))
                return "(simulated) " + (" ".join(names) if names else "the workspace is empty")
            if command.startswith("pytest"):
                return "(simulated) 12 passed in 0.84s"
            return f"(simulated) `{command}` exited with status 0"

        return workspace.once("run_shell", {"command": command}, simulate)

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a text file inside the demo workspace."""
        target = workspace.inside(path)

        def write() -> str:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            return f"wrote {len(content.encode())} bytes to {target.relative_to(workspace.root)}"

        return workspace.once("write_file", {"path": path, "bytes": len(content.encode())}, write)

    @tool
    def send_email(to: str, subject: str, body: str, smtp_password: str) -> str:
        """Send an email through the SMTP relay (simulated: it goes to outbox.jsonl).

        ``smtp_password`` is a credential *reference*; the relay resolves it.
        """
        if not smtp_password.startswith("secret://"):
            return "refused: smtp_password must be a secret:// reference, never a secret"
        message = {"to": to, "subject": subject, "body": body, "credential": smtp_password}

        def send() -> str:
            with (workspace.root / "outbox.jsonl").open("a", encoding="utf-8") as outbox:
                outbox.write(json.dumps(message) + "\n")
            return f"queued for {to} (simulated; the relay would resolve {smtp_password})"

        return workspace.once("send_email", {"to": to, "subject": subject}, send)

    return [run_shell, write_file, send_email]


def demo_interrupt_on(workspace: DemoWorkspace) -> dict[str, Any]:
    """The ``ApprovalMiddleware`` configuration of the three demo tools."""
    return {
        "run_shell": {
            "description": lambda request: (
                f"Run `{request.tool_call['args'].get('command', '')}` in the demo workspace"
            ),
            "risk": {
                "level": "high",
                "reasons": [
                    "Runs an arbitrary shell command as your user",
                    "Simulated in the demo: nothing is executed",
                ],
            },
            "allowed_decisions": ["approve", "reject"],
            "idempotent": True,  # deduplicated by approval_key()
            # The session choice covers the proposed program and subcommand, as shown.
            "session_scope": command_session_scope(expires_in_seconds=1800),
        },
        "write_file": {
            "description": lambda request: (
                f"Write {request.tool_call['args'].get('path', '?')} in the demo workspace"
            ),
            "risk": {
                "level": "medium",
                "reasons": [f"Creates or overwrites a file under {workspace.root}"],
            },
            "allowed_decisions": ["approve", "reject"],
            "idempotent": True,  # deduplicated by approval_key()
        },
        "send_email": {
            "description": lambda request: (
                f"Send an email to {request.tool_call['args'].get('to', '?')}"
            ),
            "risk": {
                "level": "high",
                "reasons": [
                    "Sends a message outside the organisation on your behalf",
                    "Uses the SMTP credential (by reference; the secret is not shown)",
                ],
            },
            "allowed_decisions": ["approve", "reject"],
            "idempotent": True,  # deduplicated by approval_key()
            "presentation": {
                "redacted": True,
                "binding_hint": (
                    f"smtp_password is the reference {SMTP_CREDENTIAL_REF}; the mail relay "
                    "resolves it when sending. The secret is never shown or stored here."
                ),
            },
        },
    }
