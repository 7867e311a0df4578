"""Answering from Slack through the served app: a click is verified, mapped, bound to the
digest it showed and recorded on the one answer path; the message follows the request.

Slack's Web API is played on loopback (:mod:`.fake_slack`); clicks are the
``block_actions`` payloads Slack sends, signed with ``slack_sdk``'s own signer.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest

from aais_langgraph import build_decision
from aais_langgraph.cli import main as cli_main
from aais_langgraph.ledger import DELIVERY
from aais_langgraph.ledger.deliveries import delivery_id_for
from aais_langgraph.webhooks import ButtonValue

from .site import (
    BLIND,
    CHANNEL,
    USERS,
    SlackSite,
    block_actions,
    button,
    post_click,
    signed,
    slack_site,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:`get_config_jsonschema`")]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackSite]:
    with slack_site(tmp_path_factory.mktemp("slack")) as served:
        yield served


def untouched(site: SlackSite, thread_id: str, request_id: str) -> None:
    """Nothing recorded: the request pending, no decision, nothing ran."""
    assert site.authority.get_resolution(request_id) is None
    assert site.decided(request_id) == []
    assert site.effects.list(thread_id) == []
    assert site.paused(thread_id)


def test_a_valid_click_approves_resumes_the_thread_and_rewrites_the_message(
    site: SlackSite,
) -> None:
    thread_id, request_id = site.pause("/srv/valid.txt")
    message = site.post_of(request_id)
    assert message.body["channel"] == CHANNEL
    assert [b["action_id"] for b in message.buttons] == ["aais_approve_once", "aais_deny_once"]

    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
    answer = post_click(site, body, headers)

    assert answer.status_code == 200, answer.text
    assert answer.json()["response_type"] == "ephemeral"
    assert answer.json()["resolution"]["resolution"]["outcome"] == "approved"
    [decision] = site.decided(request_id)
    assert decision["actor"]["id"] == "alice" and decision["actor"]["authenticated_by"] == "slack"
    wait_for(lambda: site.effects.list(thread_id), what="the approved action to run")
    assert site.effects.list(thread_id) == [(thread_id, "delete_file", "/srv/valid.txt")]
    wait_for(lambda: not site.paused(thread_id), what="the thread to finish")
    [update] = wait_for(lambda: site.updates_of(request_id), what="the message rewritten")
    assert update.buttons == []
    assert "Approved" in update.text and "alice" in update.text
    assert (update.body["channel"], update.body["ts"]) == (CHANNEL, message.ts)


def test_a_bad_signature_is_refused_before_anything_is_read(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/forged.txt")
    message = site.post_of(request_id)
    payload = block_actions(message, button(message, "approve"), user=USERS["alice"])
    body, headers = signed(payload, secret="not-the-apps-signing-secret")

    answer = post_click(site, body, headers)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "aais.slack_signature"
    untouched(site, thread_id, request_id)
    # Unsigned, and signed for another body, alike.
    assert post_click(site, body, {"content-type": headers["content-type"]}).status_code == 401
    _, other = signed(payload)
    assert post_click(site, body + b"&x=1", other).status_code == 401
    untouched(site, thread_id, request_id)


def test_a_body_over_the_size_bound_is_refused_unread(site: SlackSite) -> None:
    body, headers = signed({"type": "block_actions", "padding": "x" * 1_000_001})

    answer = post_click(site, body, headers)

    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "aais.body_too_large"


def test_a_stale_timestamp_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/stale.txt")
    message = site.post_of(request_id)
    payload = block_actions(message, button(message, "approve"), user=USERS["alice"])
    body, headers = signed(payload, age=6 * 60)  # rightly signed, six minutes ago

    answer = post_click(site, body, headers)

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "aais.slack_signature"
    untouched(site, thread_id, request_id)


def test_a_replayed_click_records_nothing_twice(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/replayed.txt")
    message = site.post_of(request_id)
    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))

    first = post_click(site, body, headers)
    again = post_click(site, body, headers)

    assert first.status_code == 200, first.text
    # An identical duplicate: the same resolution (SPEC §10), nothing recorded again.
    assert again.status_code == 200, again.text
    assert again.json()["resolution"] == first.json()["resolution"]
    assert len(site.decided(request_id)) == 1
    wait_for(lambda: site.effects.list(thread_id), what="the approved action to run")
    assert len(site.effects.list(thread_id)) == 1


def test_a_slack_user_not_in_slack_users_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/unmapped.txt")
    message = site.post_of(request_id)
    body, headers = signed(block_actions(message, button(message, "approve"), user="U0STRANGER"))

    answer = post_click(site, body, headers)

    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "aais.slack_user"
    untouched(site, thread_id, request_id)


def test_a_user_the_policy_does_not_allow_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/intern.txt")
    message = site.post_of(request_id)
    body, headers = signed(
        block_actions(message, button(message, "approve"), user=USERS["mallory"])
    )

    answer = post_click(site, body, headers)

    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "aais.forbidden"
    untouched(site, thread_id, request_id)
    # The request stays answerable by someone who may.
    body, headers = signed(block_actions(message, button(message, "deny"), user=USERS["bob"]))
    assert post_click(site, body, headers).status_code == 200
    assert site.authority.get_resolution(request_id).resolution.outcome == "denied"


def test_a_digest_that_is_not_the_requests_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/digest.txt")
    message = site.post_of(request_id)
    shown = button(message, "approve")
    value = ButtonValue.decode(shown["value"])
    other = ButtonValue(value.request_id, "sha256:" + "0" * 64, value.decision, value.scope)
    forged = {**shown, "value": other.encode()}
    body, headers = signed(block_actions(message, forged, user=USERS["alice"]))

    answer = post_click(site, body, headers)

    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "aais.digest_mismatch"
    untouched(site, thread_id, request_id)


def test_a_click_in_another_channel_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/elsewhere.txt")
    message = site.post_of(request_id)
    payload = block_actions(
        message, button(message, "approve"), user=USERS["alice"], channel="C0OTHER"
    )
    body, headers = signed(payload)

    answer = post_click(site, body, headers)

    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "aais.slack_payload"
    untouched(site, thread_id, request_id)


def test_a_click_from_another_workspace_is_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/workspace.txt")
    message = site.post_of(request_id)
    payload = block_actions(
        message, button(message, "approve"), user=USERS["alice"], team="T0OTHER"
    )
    body, headers = signed(payload)

    answer = post_click(site, body, headers)

    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "aais.slack_payload"
    untouched(site, thread_id, request_id)


def test_a_request_resolved_elsewhere_updates_the_message_and_records_nothing(
    site: SlackSite,
) -> None:
    thread_id, request_id = site.pause("/srv/inbox.txt")
    message = site.post_of(request_id)
    requested = site.authority.get_request(request_id)
    assert requested is not None
    decided = build_decision(requested, decision="deny", actor={"id": "bob", "type": "human"})
    via_http = httpx.post(
        f"{site.url}/approvals/{request_id}/decisions",
        content=json.dumps(decided.to_json()),
        headers={"Authorization": "Bearer bob-token", "Content-Type": "application/json"},
        timeout=30,
    )
    assert via_http.status_code == 200, via_http.text
    [update] = wait_for(lambda: site.updates_of(request_id), what="the message rewritten")
    assert "Denied" in update.text and "bob" in update.text and update.buttons == []

    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
    answer = post_click(site, body, headers)

    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "aais.conflict"
    assert [d["actor"]["id"] for d in site.decided(request_id)] == ["bob"]
    assert site.authority.get_resolution(request_id).resolution.outcome == "denied"
    assert site.effects.list(thread_id) == []


def test_a_request_approved_with_the_cli_has_its_message_rewritten(site: SlackSite) -> None:
    # The CLI's writes record no Slack delivery (it knows no channels): the sender
    # catches up from the event stream.
    thread_id, request_id = site.pause("/srv/cli.txt")
    message = site.post_of(request_id)
    out = io.StringIO()
    argv = ["--db", str(site.db), "approve", request_id, "--yes"]
    assert cli_main(argv, stdin=io.StringIO(""), stdout=out) == 0, out.getvalue()

    [update] = wait_for(lambda: site.updates_of(request_id), what="the message rewritten")
    assert "Approved" in update.text and update.buttons == []
    assert update.body["ts"] == message.ts
    body, headers = signed(block_actions(message, button(message, "deny"), user=USERS["alice"]))
    assert post_click(site, body, headers).status_code == 409  # and records nothing
    assert len(site.decided(request_id)) == 1
    # The served app resumes what another process decided.
    wait_for(lambda: site.effects.list(thread_id), what="the approved action to run")


def test_an_expired_request_has_its_message_rewritten(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/expired.txt", raised_ago=timedelta(hours=1))
    wait_for(lambda: site.authority.get_resolution(request_id), what="the expiry sweep")
    assert site.authority.get_resolution(request_id).resolution.outcome == "expired"
    [update] = wait_for(lambda: site.updates_of(request_id) or None, what="a rewritten message")
    assert "Expired" in update.text and update.buttons == []
    assert site.effects.list(thread_id) == []


def test_no_message_shows_arguments_to_a_channel_that_may_not_view_them(
    site: SlackSite,
) -> None:
    _, request_id = site.pause("/srv/quarterly-layoffs.txt")
    shown = site.post_of(request_id)  # the ops channel's principal may view it
    assert "/srv/quarterly-layoffs.txt" in shown.text  # it shows arguments: a value would show
    ledger = site.authority.ledger
    post_id = delivery_id_for("blind", "approval.requested", request_id)

    skipped = wait_for(
        lambda: (work := ledger.get_work(DELIVERY, post_id)) and work.state == "skipped" and work,
        what="the blind channel's post to be skipped",
    )

    assert skipped.last_error == "the subscription's principal may not view the request"
    assert not [call for call in site.slack.calls if call.body.get("channel") == BLIND]
    assert not [
        call
        for call in site.slack.calls
        if "quarterly-layoffs" in call.text and call.body.get("channel") != CHANNEL
    ]


def test_the_same_click_sent_at_once_is_one_decision_with_one_resolution(
    site: SlackSite,
) -> None:
    thread_id, request_id = site.pause("/srv/raced.txt")
    message = site.post_of(request_id)
    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda _: post_click(site, body, headers), range(6)))

    assert [d["id"] for d in site.decided(request_id)] == [site.decided(request_id)[0]["id"]]
    # Every copy gets the one resolution: none is a second decision in conflict.
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert len({json.dumps(a.json()["resolution"]) for a in answers}) == 1
    wait_for(lambda: site.effects.list(thread_id), what="the approved action to run")
    assert len(site.effects.list(thread_id)) == 1
