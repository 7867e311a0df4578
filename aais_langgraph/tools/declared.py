"""What a tool declares about itself on the approval card: the action's kind, resource and effects.

A tool carries a :class:`ToolAction` in its LangChain metadata under
:data:`TOOL_ACTION_METADATA`, and every request for a call of that tool uses
those fields (part of the digested action). At time of use the tool about to run
must still declare the same fields, so an approval given for a tool of one
origin never runs a same-named tool of another (e.g. after a restart re-binds
the tools).

Only a ``ToolAction`` object counts, never plain data: tool metadata can hold
what a remote party chose (``langchain-mcp-adapters`` copies an MCP server's tool
annotations, unknown keys included, into the metadata), and a server must not
decide what the reviewer is told about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol import AAISValidationError, Action

ACTION_KIND = "tool.call"
TOOL_ACTION_METADATA = "aais-langgraph.org/action"
"""Tool metadata key of a :class:`ToolAction`."""

_POINTER = "/tool/metadata/aais-langgraph.org~1action"
_FIELDS = ("kind", "resource", "effects")


@dataclass(frozen=True)
class ToolAction:
    """AAIS action fields a tool declares for every call: ``kind``, ``resource``, ``effects``.

    ``kind`` is a namespaced category (default ``tool.call``); ``resource`` names
    what the tool acts on (shown on the card, matched by ``resource_prefix`` scope
    constraints); ``effects`` are advisory lines for the reviewer.
    """

    kind: str = ACTION_KIND
    resource: str | None = None
    effects: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "effects", tuple(self.effects))
        # Fail at declaration, not at the first call: the fields must be valid AAIS.
        Action.from_data({"name": "tool", "summary": "tool", "arguments": {}, **self.fields()})

    def fields(self) -> dict[str, Any]:
        """The declared fields as they appear in an AAIS action (absent ones omitted)."""
        found: dict[str, Any] = {"kind": self.kind}
        if self.resource is not None:
            found["resource"] = self.resource
        if self.effects:
            found["effects"] = list(self.effects)
        return found

    def with_metadata(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        """A copy of a tool's ``metadata`` that declares this action."""
        return {**(metadata or {}), TOOL_ACTION_METADATA: self}


def declared_action(tool: Any) -> ToolAction:
    """The ``ToolAction`` a tool declares (the default one when it declares none).

    Raises ``AAISValidationError`` when the metadata key holds anything but a
    ``ToolAction``: plain data there may come from a remote server.
    """
    metadata = getattr(tool, "metadata", None) or {}
    value = metadata.get(TOOL_ACTION_METADATA) if isinstance(metadata, dict) else None
    if value is None:
        return ToolAction()
    if not isinstance(value, ToolAction):
        raise AAISValidationError(
            _POINTER, "must be a ToolAction set by the application; plain data is refused"
        )
    return value


def declares_same(action: Action, tool: Any) -> bool:
    """True when ``tool`` still declares the kind, resource and effects ``action`` carries."""
    try:
        declared = declared_action(tool).fields()
    except AAISValidationError:
        return False
    shown = action.to_json()
    return {key: shown[key] for key in _FIELDS if key in shown} == declared
