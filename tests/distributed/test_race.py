"""20 presenters in two processes answer one approval at the same moment, disagreeing.

Ten threads in each of two worker processes call ``resume_with_decisions`` on
the same paused thread, released together. The decisions conflict: four
different envelopes (two approvals, two denials), each sent by five presenters,
so some presenters send exactly what another one sends. Whatever the
interleaving: the ledger records exactly one resolution, the action runs at most
once (once if that resolution approves), presenters who sent the winning
envelope get that resolution, and every other presenter gets ``conflict``.
"""

from __future__ import annotations

from typing import Any

import pytest

from hostile.report import record

from .harness import Scene, decide, finish, release
from .worker import config

pytestmark = pytest.mark.timeout(120)

PRESENTERS_PER_PROCESS = 10


@pytest.mark.parametrize("trial", range(2))
def test_twenty_presenters_across_two_processes(scene: Scene, trial: int) -> None:
    _, requested = scene.start_paused()
    envelopes = [decide(requested, kind).to_json() for kind in ("approve", "deny") * 2]
    plan = [envelopes[i % len(envelopes)] for i in range(2 * PRESENTERS_PER_PROCESS)]
    workers = [
        scene.spawn(
            mode="race",
            barrier=True,
            presenters=plan[p * PRESENTERS_PER_PROCESS : (p + 1) * PRESENTERS_PER_PROCESS],
            lease_wait=60,
            pool_size=PRESENTERS_PER_PROCESS + 2,
        )
        for p in range(2)
    ]
    release(workers)
    results: list[dict[str, Any]] = [r for w in workers for r in finish(w, timeout=90)["ok"]]

    request_id = requested.request.id
    recorded_all, ran = scene.resolutions(request_id), scene.effects()
    approved = any(r["resolution"]["outcome"] == "approved" for r in recorded_all)
    record(
        "races",
        len(plan),
        failed_open=int(bool(ran) and not approved),
        double_runs=max(len(ran) - 1, 0),
    )
    [recorded] = recorded_all
    resolution = recorded["resolution"]
    winner = resolution["decision_id"]
    assert resolution["outcome"] in ("approved", "denied")
    assert len(results) == 20 and not [r for r in results if "error" in r], results
    for result in results:
        if result["outcome"] == "conflict":
            assert result["decision_id"] != winner, result
        else:
            assert result["outcome"] == resolution["outcome"], result
            assert result["resolution_id"] == resolution["id"], result
    same_as_winner = [r for r in results if r["outcome"] != "conflict"]
    assert len(same_as_winner) == 5, results  # the winner and the four who sent its envelope
    assert len({r["decision_id"] for r in same_as_winner}) == 1

    approved = resolution["outcome"] == "approved"
    assert scene.effects() == ([f"{request_id} deploy"] if approved else [])
    assert scene.keyed() == ([request_id] if approved else [])
    with scene.replica() as (graph, _):
        final = graph.get_state(config(scene.job()))
    assert final.next == () and final.values["outcome"] == resolution["outcome"]
