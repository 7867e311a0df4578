"""The person who clicked is told why: an ephemeral reply to the click's ``response_url``.

Slack ignores the body of the answer to a ``block_actions`` request, so the served
app replies to the payload's ``response_url`` (on Slack's hooks host, played here on
loopback as the channel's ``hooks_url``): the catalogue's meaning of a refusal, or that
the answer was recorded; never a value of the request, and never to another host.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest

from aais_langgraph.protocol import REFUSALS
from aais_langgraph.webhooks import ButtonValue

from .fake_slack import Call
from .site import (
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
    with slack_site(tmp_path_factory.mktemp("slack-replies")) as served:
        yield served


def hook(site: SlackSite) -> str:
    """A fresh ``response_url`` under the channel's hooks host."""
    return f"{site.slack.hooks_url}actions/T0TEAM/{uuid.uuid4().hex}/token"


def reply_to(site: SlackSite, url: str) -> Call:
    path = url.removeprefix(site.slack.hooks_url.removesuffix("/hooks/"))
    [reply] = wait_for(
        lambda: [call for call in site.slack.replies() if call.ts == path] or None,
        what="the reply to the click",
    )
    return reply


def told(reply: Call) -> str:
    assert reply.body["response_type"] == "ephemeral"
    assert reply.body["replace_original"] is False
    return str(reply.body["text"])


def click(
    site: SlackSite,
    path: str,
    *,
    user: str = USERS["alice"],
    decision: str = "approve",
    within: float = 30.0,
) -> tuple[str, str, str, int]:
    """Pause on ``path``, click ``decision`` as ``user`` (the answer awaited ``within``
    seconds, as Slack awaits it): (thread, request, reply url, status)."""
    thread_id, request_id = site.pause(path)
    message = site.post_of(request_id)
    url = hook(site)
    payload = block_actions(message, button(message, decision), user=user, response_url=url)
    body, headers = signed(payload)
    answer = httpx.post(
        f"{site.url}/slack/interactions", content=body, headers=headers, timeout=within
    )
    return thread_id, request_id, url, answer.status_code


def test_a_recorded_answer_is_confirmed(site: SlackSite) -> None:
    _, request_id, url, status = click(site, "/srv/confirmed.txt")

    assert status == 200
    text = told(reply_to(site, url))
    assert text == "Your answer was recorded: the request is approved."
    assert site.authority.get_resolution(request_id).resolution.outcome == "approved"


def test_the_answer_does_not_wait_for_the_reply(site: SlackSite) -> None:
    site.slack.hooks_open.clear()  # Slack's hooks host takes its time
    try:
        # Slack gives up on an answer after three seconds; the reply would take longer.
        _, request_id, url, status = click(site, "/srv/unhurried.txt", within=3.0)

        assert status == 200  # answered while the reply still waits
        path = url.removeprefix(site.slack.hooks_url.removesuffix("/hooks/"))
        wait_for(lambda: path in site.slack.paths, what="the reply to be under way")
        assert not [call for call in site.slack.replies() if call.ts == path]
    finally:
        site.slack.hooks_open.set()
    assert told(reply_to(site, url)).startswith("Your answer was recorded")
    assert site.authority.get_resolution(request_id).resolution.outcome == "approved"


@pytest.mark.parametrize(
    ("user", "code"),
    [("U0STRANGER", "aais.slack_user"), (USERS["mallory"], "aais.forbidden")],
)
def test_a_refused_click_is_told_the_refusals_meaning(
    site: SlackSite, user: str, code: str
) -> None:
    path = f"/srv/secret-{uuid.uuid4().hex[:8]}.txt"
    thread_id, request_id, url, status = click(site, path, user=user)

    assert status == 403
    text = told(reply_to(site, url))
    assert text == REFUSALS[code].meaning
    assert path not in text and request_id not in text and user not in text
    assert site.authority.get_resolution(request_id) is None  # still pending, answerable
    assert site.paused(thread_id)


def test_a_digest_that_no_longer_matches_is_told(site: SlackSite) -> None:
    _, request_id = site.pause("/srv/moved.txt")
    message = site.post_of(request_id)
    shown = button(message, "approve")
    value = ButtonValue.decode(shown["value"])
    other = ButtonValue(value.request_id, "sha256:" + "0" * 64, value.decision, value.scope)
    url = hook(site)
    payload = block_actions(
        message, {**shown, "value": other.encode()}, user=USERS["alice"], response_url=url
    )

    assert post_click(site, *signed(payload)).status_code == 422
    assert told(reply_to(site, url)) == REFUSALS["aais.digest_mismatch"].meaning
    assert site.authority.get_resolution(request_id) is None


def test_a_request_already_resolved_is_told(site: SlackSite) -> None:
    _, request_id = site.pause("/srv/late.txt")
    message = site.post_of(request_id)
    site.authority.cancel(request_id, reason="withdrawn")
    url = hook(site)
    payload = block_actions(
        message, button(message, "approve"), user=USERS["bob"], response_url=url
    )

    assert post_click(site, *signed(payload)).status_code == 409
    assert told(reply_to(site, url)) == REFUSALS["aais.conflict"].meaning
    assert site.authority.get_resolution(request_id).resolution.outcome == "cancelled"


def test_a_request_that_expired_is_told(site: SlackSite) -> None:
    _, request_id = site.pause("/srv/expired-reply.txt", raised_ago=timedelta(hours=1))
    wait_for(lambda: site.authority.get_resolution(request_id), what="the expiry sweep")
    requested = site.authority.get_request(request_id)
    assert requested is not None
    # Its message may not have been posted before it expired: the click Slack would send
    # for its approve button, as the message would have carried it.
    value = ButtonValue(request_id, requested.request.action_digest, "approve", "once")
    shown = {"action_id": "aais_approve_once", "text": {"type": "plain_text", "text": "Approve"}}
    message = Call("chat.postMessage", {"channel": CHANNEL, "text": "a request"})
    url = hook(site)
    payload = block_actions(
        message, {**shown, "value": value.encode()}, user=USERS["bob"], response_url=url
    )

    assert post_click(site, *signed(payload)).status_code == 409
    assert told(reply_to(site, url)) == REFUSALS["aais.conflict"].meaning
    assert site.authority.get_resolution(request_id).resolution.outcome == "expired"


@pytest.mark.parametrize(
    "where",
    [
        "{base}/elsewhere/actions/T0TEAM/1/abc",  # the same host, not under hooks_url
        "{base}/hooks/../elsewhere/abc",  # climbs out of it
        "https://hooks.slack.com/actions/T0TEAM/1/abc",  # Slack's own: not this channel's
        "http://127.0.0.2:9/hooks/actions/T0TEAM/1/abc",  # another host
    ],
)
def test_a_response_url_elsewhere_is_not_posted_to(site: SlackSite, where: str) -> None:
    base = site.slack.hooks_url.removesuffix("/hooks/")
    _, request_id = site.pause("/srv/elsewhere.txt")
    message = site.post_of(request_id)
    before = len(site.slack.paths)
    url = where.format(base=base)
    payload = block_actions(message, button(message, "deny"), user=USERS["alice"], response_url=url)

    answer = post_click(site, *signed(payload))

    assert answer.status_code == 200, answer.text  # the answer is recorded all the same
    # A reply would be posted right after the answer: wait for the message rewrite,
    # which comes later, then look.
    wait_for(lambda: site.updates_of(request_id), what="the message rewritten")
    time.sleep(0.3)
    assert not [path for path in site.slack.paths[before:] if "elsewhere" in path]
    assert not [p for p in site.slack.paths[before:] if p.startswith("/hooks/")]
