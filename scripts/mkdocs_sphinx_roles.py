"""MkDocs hook: Sphinx roles in the docstrings read as code in the API reference.

The docstrings cross-reference with Sphinx roles (``:class:`~aais_langgraph.gate.X```),
which mkdocstrings renders literally (``:class:`` before the code). This hook drops the
role and, for a ``~`` target, keeps only the last component, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(
    r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>"
)


def _as_code(match: re.Match[str]) -> str:
    target = match.group(2)
    if match.group(1):
        target = target.rsplit(".", 1)[-1]
    return f"<code>{target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_as_code, html)
