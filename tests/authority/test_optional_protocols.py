"""The optional authorizer protocols are recognised as ``isinstance`` recognises them:
by their methods, on the class or on the instance, and not when a method is None."""

from __future__ import annotations

from typing import Any

import pytest

from aais_langgraph.authority import authorization as auth


class _Quorum:
    def quorum(self, kind: str, name: str, risk: str) -> int:
        return 2


class _NoQuorum:
    quorum = None


class _Nominal(auth.QuorumRule):
    pass


class _Everything(_Quorum):
    def view_selection(self, principal: Any) -> Any:
        return None

    def group_may_decide(self, group: str, resource: Any) -> Any:
        return auth.ALLOWED

    def escalates(self, request: Any) -> bool:
        return False


def _with_escalates() -> object:
    found = _Quorum()
    found.escalates = lambda request: True  # type: ignore[attr-defined]
    return found


CHECKS = [
    (auth.is_escalations, auth.Escalations),
    (auth.is_quorum_rule, auth.QuorumRule),
    (auth.is_view_selector, auth.ViewSelector),
    (auth.is_group_decisions, auth.GroupDecisions),
]


@pytest.mark.parametrize(
    "authorizer",
    [
        _Quorum(),
        _NoQuorum(),
        _Nominal(),
        _Everything(),
        _with_escalates(),
        auth.AllowAuthenticated(),
        object(),
    ],
)
@pytest.mark.parametrize(("check", "protocol"), CHECKS)
def test_recognised_as_isinstance_does(authorizer: object, check: Any, protocol: type) -> None:
    assert check(authorizer) is isinstance(authorizer, protocol)
