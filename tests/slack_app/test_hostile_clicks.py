"""Hostile bodies at the served Slack endpoint: refused with their catalogue code, never a 500.

Signed with ``slack_sdk``'s own signer where the body is meant to verify; the site's two
``[[slack]]`` channels are two channels of one Slack app (one signing secret).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostile.report import record

from .site import (
    BLIND,
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

CATEGORY = "Slack interactions"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlackSite]:
    with slack_site(tmp_path_factory.mktemp("slack-hostile")) as served:
        yield served


def tally(site: SlackSite, request_id: str | None, answer: httpx.Response) -> None:
    """Count one hostile body: failed open when it recorded a decision, 5xx as answered."""
    opened = request_id is not None and bool(site.decided(request_id))
    record(CATEGORY, 1, failed_open=int(opened), server_errors=int(answer.status_code >= 500))


@pytest.mark.parametrize(
    ("body", "signature"),
    [
        (b"payload=\xff\xfe\xfd", b"v0=" + b"0" * 64),  # not UTF-8
        (b"payload=%7B%7D\x80", b"v0=" + b"a" * 64),  # UTF-8 but for its last byte
        (b"payload=%7B%7D", b"v0=\xe9\xe9"),  # a signature that is not ASCII
        (b"\xc3\x28", b"\xff"),
    ],
)
def test_an_unsigned_body_or_signature_that_is_not_text_is_a_failed_signature(
    site: SlackSite, body: bytes, signature: bytes
) -> None:
    headers: dict[str, Any] = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": str(int(time.time())),
        "x-slack-signature": signature,
    }
    answer = post_click(site, body, headers)
    tally(site, None, answer)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "aais.slack_signature"
    assert "Traceback" not in answer.text


@pytest.mark.parametrize(
    "action_ts",
    [
        "999999999999.999999",  # past the last year a date can hold
        "32503680000.000000",  # the year 3000: a date, but not the click's moment
        "1.000000",  # 1970
        f"{time.time() + 3600:.6f}",  # an hour after the signature
    ],
)
def test_a_signed_click_at_a_moment_far_from_its_signature_is_refused(
    site: SlackSite, action_ts: str
) -> None:
    thread_id, request_id = site.pause(f"/srv/moment-{action_ts[:6]}.txt")
    message = site.post_of(request_id)
    payload = block_actions(message, button(message, "approve"), user=USERS["alice"])
    payload["actions"][0]["action_ts"] = action_ts
    body, headers = signed(payload)

    answer = post_click(site, body, headers)

    tally(site, request_id, answer)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "aais.slack_payload"
    assert "/actions/0/action_ts" in answer.json()["error"]["message"]
    assert action_ts not in answer.text
    assert site.authority.get_resolution(request_id) is None and site.paused(thread_id)


def test_a_click_in_the_second_channel_of_one_slack_app_is_answered(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/second-channel.txt")
    message = site.post_of(request_id)
    payload = block_actions(
        message,
        button(message, "approve"),
        user=USERS["alice"],
        channel=BLIND,
        response_url=f"{site.slack.hooks_url}actions/T0TEAM/2/def",
    )
    body, headers = signed(payload)

    answer = post_click(site, body, headers)

    assert answer.status_code == 200, answer.text
    assert answer.json()["resolution"]["resolution"]["outcome"] == "approved"
    wait_for(lambda: site.effects.list(thread_id), what="the approved action to run")


def test_a_click_naming_a_channel_of_no_app_is_still_refused(site: SlackSite) -> None:
    thread_id, request_id = site.pause("/srv/no-channel.txt")
    message = site.post_of(request_id)
    payload = block_actions(
        message, button(message, "approve"), user=USERS["alice"], channel="C0NOWHERE"
    )
    body, headers = signed(payload)

    answer = post_click(site, body, headers)

    tally(site, request_id, answer)
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "aais.slack_payload"
    assert site.authority.get_resolution(request_id) is None and site.paused(thread_id)


HEADER_BYTES = st.binary(max_size=80).map(
    lambda raw: bytes(b for b in raw if b > 0x20 and b != 0x7F)
)
"""Any bytes a header value may carry on the wire (visible ASCII and obs-text)."""


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=st.binary(max_size=300), timestamp=HEADER_BYTES, signature=HEADER_BYTES, now=st.booleans()
)
def test_any_unsigned_body_and_headers_are_a_failed_signature(
    site: SlackSite, body: bytes, timestamp: bytes, signature: bytes, now: bool
) -> None:
    headers: dict[str, Any] = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": str(int(time.time())).encode() if now else timestamp,
        "x-slack-signature": signature,
    }
    answer = post_click(site, body, headers)
    tally(site, None, answer)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "aais.slack_signature"
