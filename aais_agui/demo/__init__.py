"""The ``aais-agui demo`` agent: a deterministic fake model proposing gated tool calls.

Needs the ``langchain`` extra (``create_agent``).
"""

from .agent import build_demo_agent
from .model import HELP, SMTP_CREDENTIAL_REF, DemoChatModel, propose_calls
from .tools import DemoWorkspace, demo_interrupt_on, demo_tools

__all__ = [
    "HELP",
    "SMTP_CREDENTIAL_REF",
    "DemoChatModel",
    "DemoWorkspace",
    "build_demo_agent",
    "demo_interrupt_on",
    "demo_tools",
    "propose_calls",
]
