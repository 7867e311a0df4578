"""This library's extension keys: one namespace, and the keys more than one layer reads."""

from __future__ import annotations

__all__ = [
    "EXTENSION_NAMESPACE",
    "IN_REPLY_TO_EXTENSION",
    "NOTE_EXTENSION",
    "NOTE_MAX_LENGTH",
    "QUORUM_EXTENSION",
    "REPLY_EXTENSION",
    "REQUESTER_EXTENSION",
    "RESOLVED_BY_EXTENSION",
    "SUBAGENT_EXTENSION",
    "TOOL_CALL_ID_EXTENSION",
]

EXTENSION_NAMESPACE = "aais-langgraph.org/"
"""Prefix of every extension key this library writes (a ``domain/`` namespace)."""

TOOL_CALL_ID_EXTENSION = EXTENSION_NAMESPACE + "tool_call_id"
"""Request extension naming the LangChain tool call a tool approval gates."""

IN_REPLY_TO_EXTENSION = EXTENSION_NAMESPACE + "in_reply_to"
"""Extension on a presenter's reply (stdio line, WebSocket frame) naming the input it answers."""

RESOLVED_BY_EXTENSION = EXTENSION_NAMESPACE + "resolved_by"
"""Resolution extension naming who or what resolved a request without a decision (a
cancel, an expiry, a run that moved on): an AAIS actor (``type`` ``human`` or ``policy``)."""

REQUESTER_EXTENSION = EXTENSION_NAMESPACE + "requester"
"""Request extension naming the authenticated person whose run raised it: ``{"id": ...}``
(AAIS ``origin`` admits no extensions, so it travels on the request). Access rules read
it (a requester sees their own requests; separation of duties)."""

QUORUM_EXTENSION = EXTENSION_NAMESPACE + "quorum"
"""Request extension of an action that needs several distinct approvers (SPEC §10: one
request per approval needed, each bound to the same action digest): ``{"index": k,
"of": n, "first_request_id": ..., "approved_by": [actor ids of approvals 1..k-1]}``."""

SUBAGENT_EXTENSION = EXTENSION_NAMESPACE + "subagent"
"""Request extension of an approval raised inside a subgraph (a deep agent's subagent):
``{"run_id": ..., "name": ...}``. ``run_id`` names the one invocation (the AAIS id of the
parent checkpoint namespace: the same across the pause, a restart and the resume, the
AG-UI ``subagentRunId``); ``name`` is the subagent's (LangChain's ``lc_agent_name``),
when it has one."""

NOTE_EXTENSION = EXTENSION_NAMESPACE + "note"
"""Decision extension holding the reviewer's note (a string of 1 to
:data:`NOTE_MAX_LENGTH` characters; AAIS 1.0 has no standard field for it). The
authority checks it and copies it into the resolution's extensions, so it is recorded
and audited with the resolution; a tool that opts in shows it to the model on a denial."""

REPLY_EXTENSION = EXTENSION_NAMESPACE + "reply"
"""Decision extension: ``True`` on a deny whose reviewer's note answers for the tool
(HumanInTheLoopMiddleware's ``respond``): the tool does not run and the model reads the
note as its result. Copied with the note into the resolution's extensions."""

NOTE_MAX_LENGTH = 1000
"""The longest reviewer note the authority records, in characters."""
