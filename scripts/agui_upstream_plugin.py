"""A pytest plugin that runs ag-ui-langgraph's own tests against ``AAISLangGraphAgent``.

Loaded with ``-p agui_upstream_plugin`` (``scripts/`` on ``PYTHONPATH``) before the
tests are collected, it replaces ``LangGraphAgent`` in ``ag_ui_langgraph`` and
``ag_ui_langgraph.agent`` with a subclass of :class:`~aais_agui.AAISLangGraphAgent`
that needs no ``authority`` argument (it gets a fresh in-memory
:class:`~aais_langgraph.ApprovalAuthority`), so every test that builds, subclasses
or patches ``LangGraphAgent`` exercises ours. The tests themselves are not edited.
"""

from __future__ import annotations

from typing import Any

import ag_ui_langgraph
import ag_ui_langgraph.agent

from aais_agui import AAISLangGraphAgent
from aais_langgraph import ApprovalAuthority

STOCK_AGENT = ag_ui_langgraph.agent.LangGraphAgent


class UpstreamLangGraphAgent(AAISLangGraphAgent):
    """``AAISLangGraphAgent`` built the way upstream's tests build ``LangGraphAgent``."""

    def __init__(self, *, authority: ApprovalAuthority | None = None, **kwargs: Any) -> None:
        super().__init__(
            authority=authority if authority is not None else ApprovalAuthority(), **kwargs
        )


ag_ui_langgraph.LangGraphAgent = UpstreamLangGraphAgent
ag_ui_langgraph.agent.LangGraphAgent = UpstreamLangGraphAgent


def pytest_report_header(config: Any) -> str:
    return (
        f"ag-ui-langgraph's tests against {AAISLangGraphAgent.__module__}."
        f"{AAISLangGraphAgent.__qualname__} (LangGraphAgent replaced)"
    )


def pytest_collection_finish(session: Any) -> None:
    """Refuse to run a test module that still holds the stock class."""
    import pytest

    for item in session.items:
        module = getattr(item, "module", None)
        if getattr(module, "LangGraphAgent", None) is STOCK_AGENT:
            raise pytest.UsageError(f"{item.nodeid}: imported the stock LangGraphAgent")
