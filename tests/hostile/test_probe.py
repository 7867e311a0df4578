"""The probe itself: it must see an approval and an executed action, or the suite proves nothing."""

from __future__ import annotations

import time

from .conftest import Probe, Site


def test_the_probe_counts_a_correct_approval_as_open(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, "probe self-test", [paused])
    with site.client() as client:
        response = client.post(
            f"/approvals/{paused.request_ids[0]}/decisions", json=paused.decided()
        )
    probe.response(response, "alice approves")
    assert probe.failed_open == 1 and probe.tried == 1
    deadline = time.monotonic() + 20
    while not site.effects.list(paused.thread_id):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    probe.status(200, "after the action ran")
    assert probe.failed_open == 2


def test_the_probe_counts_a_denial_as_a_lost_approval(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, "probe self-test", [paused])
    # The site's policy lets only alice decide (every kind), so alice's denial stands.
    with site.client("alice-token") as client:
        response = client.post(
            f"/approvals/{paused.request_ids[0]}/decisions", json=paused.decided(kind="deny")
        )
    probe.response(response, "alice denies")
    assert (probe.failed_open, probe.lost) == (0, 1)
