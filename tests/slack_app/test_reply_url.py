"""Which ``response_url`` a Slack channel replies to: only one under its ``hooks_url``."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.webhooks import SlackChannel


def channel(hooks_url: str = "https://hooks.slack.com/") -> SlackChannel:
    return SlackChannel(
        name="ops", channel="C0X", token="xoxb-1", signing_secret="s", hooks_url=hooks_url
    )


def test_slacks_response_urls_are_replied_to() -> None:
    assert channel().replies_to("https://hooks.slack.com/actions/T0TEAM/1234/AbCdEf")


@pytest.mark.parametrize(
    "url",
    [
        None,
        42,
        "",
        "https://hooks.slack.com.evil.example/actions/x",
        "https://hooks.slack.com@evil.example/actions/x",
        "http://hooks.slack.com/actions/x",
        "https://evil.example/https://hooks.slack.com/actions/x",
        "https://hooks.slack.com/../x",
        "https://hooks.slack.com/actions/%2e%2e/x",
        "https://hooks.slack.com/actions/x#frag",
        "https://hooks.slack.com/actions/x y",
        "https://hooks.slack.com/actions\\x",
        "https://hooks.slack.com/actions/\u00e9",
        "https://hooks.slack.com/" + "a" * 3000,
    ],
)
def test_anything_else_is_not(url: object) -> None:
    assert not channel().replies_to(url)


@given(st.text(max_size=200))
def test_a_url_replied_to_is_on_the_hooks_host(url: str) -> None:
    hooks = channel()
    for candidate in (url, f"https://hooks.slack.com/{url}"):
        if hooks.replies_to(candidate):
            found = urlsplit(candidate)
            assert (found.scheme, found.netloc) == ("https", "hooks.slack.com")
            assert ".." not in found.path.split("/")


@pytest.mark.parametrize(
    "bad", ["hooks.slack.com/", "ftp://hooks.slack.com/", "https://hooks.slack.com", "https:///"]
)
def test_a_hooks_url_is_checked(bad: str) -> None:
    with pytest.raises(ValueError, match=r"hooks_url"):
        channel(bad)
