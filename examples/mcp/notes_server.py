"""A small MCP server over stdio: notes in one folder, and a log of every call it runs.

    python notes_server.py NOTES_DIR

``write_note`` has a side effect (it writes NOTES_DIR/NAME); ``read_note`` only
reads. Every call the server executes is appended to NOTES_DIR/calls.jsonl with
its exact arguments, so you can see what reached the server, and what never did.
Written with the ``mcp`` package's FastMCP; an MCP client (here
``langchain-mcp-adapters``) starts it as a subprocess.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

NOTES = Path(sys.argv[1]).resolve()
CALL_LOG = NOTES / "calls.jsonl"
NOTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\.(md|txt)")

server = FastMCP("notes", log_level="WARNING")


def _log(tool: str, arguments: dict[str, str]) -> None:
    with CALL_LOG.open("a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


def _note(name: str) -> Path:
    # A plain file name inside NOTES: no paths, no way out of the folder.
    if not NOTE_NAME.fullmatch(name):
        raise ValueError("name must be a plain file name ending in .md or .txt")
    return NOTES / name


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def write_note(name: str, text: str) -> str:
    """Write (or replace) the note NAME with TEXT."""
    _log("write_note", {"name": name, "text": text})
    _note(name).write_text(text, encoding="utf-8")
    return f"wrote {name} ({len(text)} characters)"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(name: str) -> str:
    """Read the note NAME (empty if it does not exist)."""
    _log("read_note", {"name": name})
    path = _note(name)
    return path.read_text(encoding="utf-8") if path.exists() else ""


if __name__ == "__main__":
    NOTES.mkdir(parents=True, exist_ok=True)
    server.run("stdio")
