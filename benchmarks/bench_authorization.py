"""Benchmark: what authorization costs the inbox listing and a decision, each against its baseline.

Run with ``python benchmarks/bench_authorization.py`` (``--quick`` for a short run).
Two rows, each a ratio measured in one run with the rounds interleaved, so load
from elsewhere on the machine hits both sides alike:

- **filtered listing**: ``pending_approvals`` for a user who may see 1k of 10k pending
  requests (an access policy: their group decides one action kind of ten), against
  the unfiltered listing of a ledger holding 1k pending; aim <= 1.5x;
- the same filtered listing against the unfiltered listing of all 10k (what the
  filter itself costs on a listing of the same size); aim <= 1.5x;
- **decision with Cedar**: ``request`` + ``decide`` (approve once) by a principal a
  Cedar policy set permits, against the same round trip with no authorizer, on the
  default SQLite ledger (fsync'd writes, as deployed) and in memory (the Cedar call
  against the bare authority work); aim <= 1.1x.

Listings run on in-memory ledgers and on SQLite files (the default deployment).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import InMemoryLedger, SqliteLedger
from aais_langgraph.protocol import Actor, build_decision
from aais_langgraph.threads import pending_approvals

ORIGIN = {"harness": "bench", "session_id": "s-1"}
KINDS = [f"kind.{index}" for index in range(10)]
VIEWER = Principal(Actor(id="alice", type="human"), frozenset({"team-0"}))
CEDAR = """
permit (principal in Group::"team-0", action, resource)
when { resource.kind == "kind.0" };
"""


def action(kind: str, index: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": "act",
        "summary": "Do the thing",
        "arguments": {"index": index},
    }


def filled(
    count: int, kinds: list[str], authorizer: Any = None, ledger: Any = None
) -> ApprovalAuthority:
    authority = ApprovalAuthority(
        ledger if ledger is not None else InMemoryLedger(), authorizer=authorizer
    )
    for index in range(count):
        kind = kinds[index % len(kinds)]
        authority.request(
            action(kind, index),
            origin={"harness": "bench", "session_id": f"s{index}"},
            thread_id=f"t{index}",
        )
    return authority


def timed(run: Callable[[], Any], repeats: int) -> float:
    started = time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.perf_counter() - started) / repeats


def interleaved(
    baseline: Callable[[], Any], subject: Callable[[], Any], rounds: int, repeats: int
) -> tuple[float, float, list[float]]:
    base, gated, ratios = [], [], []
    for index in range(rounds):  # the order flips every round
        if index % 2 == 0:
            b = timed(baseline, repeats)
            g = timed(subject, repeats)
        else:
            g = timed(subject, repeats)
            b = timed(baseline, repeats)
        base.append(b)
        gated.append(g)
        ratios.append(g / b)
    return statistics.median(base), statistics.median(gated), ratios


Row = tuple[str, float, float, list[float]]


def listing_rows(
    rounds: int, repeats: int, size: int, ledger: Callable[[str], Any], label: str
) -> list[Row]:
    rules = {"approvers": [{"kinds": ["kind.0"], "groups": ["team-0"]}], "default_approvers": ["x"]}
    policy = AccessPolicy.from_mapping({**rules, "requesters": {"view_own": False}})
    small = filled(size // 10, ["kind.0"], ledger=ledger("small"))
    filtered = filled(size, KINDS, authorizer=policy, ledger=ledger("filtered"))
    shown = pending_approvals(filtered, viewer=VIEWER).snapshot.pending
    assert len(shown) == size // 10, len(shown)
    assert len(pending_approvals(small).snapshot.pending) == size // 10
    rows = []
    base, gated, ratios = interleaved(
        lambda: pending_approvals(small),
        lambda: pending_approvals(filtered, viewer=VIEWER),
        rounds,
        repeats,
    )
    rows.append(
        (
            f"listing {size // 10} of {size} for one user vs {size // 10}, {label}",
            base,
            gated,
            ratios,
        )
    )
    base, gated, ratios = interleaved(
        lambda: pending_approvals(filtered),
        lambda: pending_approvals(filtered, viewer=VIEWER),
        rounds,
        repeats,
    )
    rows.append(
        (f"listing {size // 10} of {size} for one vs all {size}, {label}", base, gated, ratios)
    )
    return rows


def decision_row(rounds: int, repeats: int, ledger: Callable[[str], Any], label: str) -> Row:
    plain = ApprovalAuthority(ledger("plain"))
    cedar = ApprovalAuthority(ledger("cedar"), authorizer=CedarAuthorizer(CEDAR))

    def round_trip(authority: ApprovalAuthority) -> Callable[[], Any]:
        def run() -> Any:
            requested = authority.request(action("kind.0", 0), origin=ORIGIN)
            decided = build_decision(requested, decision="approve", actor=VIEWER.actor)
            resolved = authority.decide(decided, actor=VIEWER)
            assert resolved.approved, resolved.resolution.message
            return resolved

        return run

    base, gated, ratios = interleaved(round_trip(plain), round_trip(cedar), rounds, repeats)
    return f"request + decide with Cedar vs without, {label}", base, gated, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    args = parser.parse_args()
    rounds, repeats = (5, 3) if args.quick else (11, 5)
    print("bench_authorization: ratio = with authorization / baseline, median (min-max)")
    print(f"{'row':<56} {'baseline':>10} {'with':>10} unit   ratio  (min-max)    aim")

    def show(row: Row, aim: float) -> None:
        label, base, gated, ratios = row
        ratio = statistics.median(ratios)
        print(
            f"{label:<56} {base * 1e3:>10.3f} {gated * 1e3:>10.3f} ms   {ratio:.2f}x "
            f"({min(ratios):.2f}-{max(ratios):.2f})   <= {aim}x",
            flush=True,
        )

    for row in listing_rows(rounds, repeats, 10_000, lambda _: InMemoryLedger(), "memory"):
        show(row, 1.5)
    with tempfile.TemporaryDirectory() as folder:
        for row in listing_rows(
            rounds,
            repeats,
            10_000,
            lambda name: SqliteLedger(Path(folder) / f"{name}.db"),
            "SQLite",
        ):
            show(row, 1.5)
    show(decision_row(rounds, repeats * 40, lambda _: InMemoryLedger(), "memory"), 1.1)
    with tempfile.TemporaryDirectory() as folder:
        sqlite = decision_row(
            rounds, repeats * 4, lambda name: SqliteLedger(Path(folder) / f"{name}.db"), "SQLite"
        )
    show(sqlite, 1.1)


if __name__ == "__main__":
    main()
