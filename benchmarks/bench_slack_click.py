"""Benchmark: how long a Slack click waits for its answer, next to an HTTP decision.

Run with ``python benchmarks/bench_slack_click.py [--approvals 40]``. The demo graph is
served by ``create_app`` on loopback with a Slack app channel (``tests/slack_app/site.py``:
SQLite ledger, the deliveries, resume and expiry jobs running, Slack's Web API played
on loopback). Each round pauses two threads and answers one with a signed
``block_actions`` click on its posted button (``POST /slack/interactions``) and the
other with ``POST /approvals/{id}/decisions`` (the baseline), in alternating order, so
load from elsewhere hits both. Figures are milliseconds from sending the request to
its answer (Slack waits at most 3 s): median, 95th percentile and the most, per way
in, and the ratio of the medians. The resume runs in the background after either
answer and is not timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from aais_langgraph import build_decision  # noqa: E402
from slack_app.site import (  # noqa: E402
    USERS,
    SlackSite,
    block_actions,
    button,
    post_click,
    signed,
    slack_site,
)


def by_slack(site: SlackSite, request_id: str) -> float:
    message = site.post_of(request_id)
    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
    start = time.perf_counter()
    answer = post_click(site, body, headers)
    took = time.perf_counter() - start
    assert answer.status_code == 200, answer.text
    return took


def by_http(site: SlackSite, request_id: str) -> float:
    requested = site.authority.get_request(request_id)
    assert requested is not None
    decided = build_decision(requested, decision="approve", actor={"id": "bob", "type": "human"})
    body = json.dumps(decided.to_json())
    headers = {"Authorization": "Bearer bob-token", "Content-Type": "application/json"}
    start = time.perf_counter()
    answer = httpx.post(
        f"{site.url}/approvals/{request_id}/decisions", content=body, headers=headers, timeout=30
    )
    took = time.perf_counter() - start
    assert answer.status_code == 200, answer.text
    return took


def summary(name: str, seconds: list[float]) -> str:
    ms = sorted(value * 1000 for value in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {p95:.1f} | {ms[-1]:.1f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=40, help="answers per way in")
    args = parser.parse_args()
    slack: list[float] = []
    http: list[float] = []
    with tempfile.TemporaryDirectory() as folder, slack_site(Path(folder)) as site:
        for index in range(args.approvals):
            _, first = site.pause(f"/srv/bench-{index}-a.txt")
            _, second = site.pause(f"/srv/bench-{index}-b.txt")
            site.post_of(first), site.post_of(second)  # both posted before timing
            if index % 2:
                slack.append(by_slack(site, first))
                http.append(by_http(site, second))
            else:
                http.append(by_http(site, first))
                slack.append(by_slack(site, second))
    print("| way in | answers | median ms | p95 ms | most ms |")
    print("|---|---:|---:|---:|---:|")
    print(summary("Slack click, /slack/interactions", slack))
    print(summary("HTTP decision, /approvals/{id}/decisions", http))
    print(f"\nmedian ratio Slack/HTTP: {statistics.median(slack) / statistics.median(http):.2f}x")


if __name__ == "__main__":
    main()
