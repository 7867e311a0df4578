"""What one principal may do with one thread: start it, post to it, read it, or follow its requests.

A thread is a resource like a request (the authorizer is asked ``start``, ``post``
and ``view`` about it, see :mod:`.access_policy` and :mod:`.cedar`), and it holds
requests each with its own visibility. :class:`ThreadAccess` is the answer for one
principal, worked out once per call by
:meth:`~aais_langgraph.authority.Access.thread_access`:

- ``content``: they may read the thread itself (its messages and state);
- ``shown``: the requests on it they may view; who may view one follows it, so they
  are shown those
  requests (an approver follows the requests they decide) — never the messages or
  the state of a thread whose content they may not read;
- ``hidden``: the requests on it they may not view; wherever the thread is shown,
  each appears at most as "a request you may not view" (:data:`HIDDEN_REQUEST`),
  with no envelope and no argument value.

A trusted caller (no principal, an administrator) reads everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ledger import ThreadRecord
from .authorization import Permission

__all__ = ["HIDDEN_REQUEST", "ThreadAccess"]

HIDDEN_REQUEST = "a request you may not view"
"""What a thread shows in place of a request its viewer may not view."""


@dataclass(frozen=True)
class ThreadAccess:
    """One principal's access to one thread (see the module docs)."""

    thread_id: str
    record: ThreadRecord | None
    """Who started the thread and who posted to it (None: nobody yet)."""
    content: bool
    """Whether they may read its messages and state."""
    shown: frozenset[str] = frozenset()
    """Request ids on the thread they may view."""
    hidden: frozenset[str] = frozenset()
    """Request ids on the thread they may not view."""
    hidden_tool_calls: frozenset[str] = frozenset()
    """Tool call ids of the hidden requests (their calls' arguments are not shown)."""
    refusal: Permission = field(default_factory=lambda: Permission(True))
    """The authorizer's answer to ``view`` (its reason, when they may see nothing)."""

    @property
    def follows(self) -> bool:
        """Whether they may view at least one of its requests."""
        return bool(self.shown)

    @property
    def known(self) -> bool:
        """Whether anyone started the thread or raised a request on it."""
        return self.record is not None or self.follows or bool(self.hidden)

    @property
    def visible(self) -> bool:
        """Whether they may see anything of it: its content, or a request they follow (a
        thread nobody started yet is visible: it is empty)."""
        return self.content or self.follows or not self.known

    trusted_caller: bool = False
    """A trusted caller (no principal, an administrator): everything, checked nothing."""

    @property
    def trusted(self) -> bool:
        """Whether nothing on it is hidden from them and they may read its content."""
        return self.trusted_caller or (self.content and not self.hidden)

    @classmethod
    def everything(cls, thread_id: str, record: ThreadRecord | None) -> ThreadAccess:
        """The access of a trusted caller: all of it."""
        return cls(thread_id, record, content=True, trusted_caller=True)
