"""Outside a run: the one driver of paused threads, their listing and their recovery.

:class:`ThreadDriver` answers, resumes and lists paused threads of one graph,
every answer through its one planner (:class:`AnswerPlanner`); the quickstart's
module-level ``resume_with_decisions`` and ``pending_approvals`` are thin wrappers
over it. Nothing here runs inside a
node: that is :mod:`aais_langgraph.gate`, which never imports this package.
"""

from .answers import (
    AnswerPlanner,
    AnswerRefused,
    Cancellation,
    OpenAnswer,
    ParsedAnswer,
    recorded_resume,
)
from .driver import (
    RESUMING_EXTENSION,
    DueReport,
    ThreadDriver,
    apending_approvals,
    aresume_with_decisions,
    pending_approvals,
    resume_with_decisions,
    waiting_resumes,
    with_resuming,
)
from .reconcile import (
    INTEGRITY_ERRORS_EXTENSION,
    IntegrityProblem,
    areconcile_checkpoints,
    reconcile_checkpoints,
)
from .recovery import (
    ResolvedScan,
    aresolved_threads,
    astranded_threads,
    resolved_threads,
    stranded_threads,
)
from .runs import DEFAULT_LEASE_WAIT, LeasedThread, run_config
from .views import ThreadView
from .visibility import EventFilter, visible_snapshot

__all__ = [
    "DEFAULT_LEASE_WAIT",
    "INTEGRITY_ERRORS_EXTENSION",
    "RESUMING_EXTENSION",
    "AnswerPlanner",
    "AnswerRefused",
    "Cancellation",
    "DueReport",
    "EventFilter",
    "IntegrityProblem",
    "LeasedThread",
    "OpenAnswer",
    "ParsedAnswer",
    "ResolvedScan",
    "ThreadDriver",
    "ThreadView",
    "apending_approvals",
    "areconcile_checkpoints",
    "aresolved_threads",
    "aresume_with_decisions",
    "astranded_threads",
    "pending_approvals",
    "reconcile_checkpoints",
    "recorded_resume",
    "resolved_threads",
    "resume_with_decisions",
    "run_config",
    "stranded_threads",
    "visible_snapshot",
    "waiting_resumes",
    "with_resuming",
]
