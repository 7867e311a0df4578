"""A quorum through Slack: each approval is its own message, nobody approves twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from .site import USERS, SlackSite, block_actions, button, post_click, signed, slack_site, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:`get_config_jsonschema`")]

RULES = {"default_approvers": ["sre"], "approvers": [{"groups": ["sre"], "quorum": 2}]}


def second_request(site: SlackSite, thread_id: str, first: str) -> str:
    def pending() -> str | None:
        config = {"configurable": {"thread_id": thread_id}}
        for interrupt in site.graph.get_state(config).interrupts:
            request_id = str(interrupt.value["request"]["id"])
            if request_id != first:
                return request_id
        return None

    return wait_for(pending, what="the quorum's second request")


def test_two_people_approve_from_slack_and_the_first_may_not_approve_twice(
    tmp_path: Path,
) -> None:
    with slack_site(tmp_path, rules=RULES) as site:
        thread_id, first = site.pause("/srv/quorum.txt")
        message = site.post_of(first)
        assert "approval 1 of 2" in message.text
        body, headers = signed(
            block_actions(message, button(message, "approve"), user=USERS["alice"])
        )
        assert post_click(site, body, headers).status_code == 200
        assert site.effects.list(thread_id) == []  # one approval of two runs nothing

        second = second_request(site, thread_id, first)
        message = site.post_of(second)
        assert "approval 2 of 2" in message.text and "alice" in message.text
        again = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
        refused = post_click(site, *again)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "aais.forbidden"
        assert site.authority.get_resolution(second) is None

        body, headers = signed(
            block_actions(message, button(message, "approve"), user=USERS["bob"])
        )
        assert post_click(site, body, headers).status_code == 200
        wait_for(lambda: site.effects.list(thread_id), what="the action, after two approvals")
        assert site.effects.list(thread_id) == [(thread_id, "delete_file", "/srv/quorum.txt")]
