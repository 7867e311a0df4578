"""Answering from Slack: ``POST /slack/interactions``, the buttons of a Slack channel's messages.

Slack posts each click as a form-encoded ``payload=`` (a ``block_actions`` payload),
signed with the app's signing secret. In order, before anything is recorded:

1. the body, bounded by ``max_body_bytes``, must be UTF-8 text and verify with
   ``slack_sdk``'s :class:`~slack_sdk.signature.SignatureVerifier` for a ``[[slack]]``
   channel's signing secret, its timestamp within five minutes (401
   ``aais.slack_signature``, whatever bytes came: nothing is parsed before this);
2. the payload is read strictly (one ``payload`` field, I-JSON without duplicate
   keys, ``type = "block_actions"`` with one button of this app, clicked in a channel
   whose secret verified the body, of its ``team`` when it names one, its
   ``action_ts`` within five minutes of the signed timestamp; else 422
   ``aais.slack_payload``). Channels of one Slack app share its signing secret: the
   payload's channel, among those the signature verified for, is the one answered;
3. the Slack user must be in ``[slack_users]`` (403 ``aais.slack_user``): the principal
   they map to is the actor (SPEC §10: from the authenticated channel, never a body);
4. the button's value names the request and the action digest the message showed: an
   unknown request is 404, a digest that is not the stored request's is 422
   ``aais.digest_mismatch`` (SPEC §5), a request the principal may not view is 403,
   and a request resolved already by another answer is 409 ``aais.conflict`` with
   nothing recorded: its message is rewritten by the outbox delivery its resolution
   recorded.

Then the decision is recorded on the same path as ``POST /approvals/{id}/decisions``
(:func:`~aais_agui.http.decisions.arecord_decision`: separation of duties, quorum,
groups, expiry) and the thread is resumed in the background. The decision's id and
time come from the click (its user, action and ``action_ts``), so the same signed
body sent again is an identical duplicate (SPEC §10): the same resolution, nothing
recorded twice, whether it arrives while the first is being recorded or after. A
click refused before anything is recorded leaves the request pending and answerable.
The answer is JSON at once (Slack waits three seconds) with the outcome. Slack shows
nothing of that body to the person who clicked, so after it is sent they are told in
an ephemeral reply to the payload's ``response_url`` (``slack_sdk``'s
:class:`~slack_sdk.webhook.WebhookClient`): the refusal's meaning from the catalogue
(:data:`~aais_langgraph.protocol.REFUSALS`), or that their answer was recorded, never
a value of the request or the payload. Only a ``response_url`` under the channel's
``hooks_url`` (Slack's hooks host) is replied to; the reply is best effort (one
attempt, off the answer's path: it may be lost, and nothing depends on it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.background import BackgroundTask

from aais_langgraph.authority import TERMINAL, Principal
from aais_langgraph.protocol import (
    REFUSALS,
    AAISValidationError,
    ApprovalResolved,
    build_decision,
    http_refusal,
    loads_strict,
    outcome_refusal,
)
from aais_langgraph.webhooks import ButtonValue, SlackApp, SlackChannel

from ..service import ApprovalService
from .decisions import DecisionRefused, arecord_decision
from .refusals import refused
from .security import Security

__all__ = ["slack_router"]

logger = logging.getLogger(__name__)

_STATUS = {"conflict": 409, "stale": 409, "invalid": 422}
_TIMESTAMP_DIGITS = 12
_CLICK_SKEW = 300
"""Seconds a click's ``action_ts`` may be from the signed timestamp (the signature's own
tolerance): a click is sent when it happens."""
_SLACK_ID = 64
_REPLY_TIMEOUT = 5
"""Seconds the reply to a click's ``response_url`` may take (it is sent after the answer)."""


@dataclass(frozen=True)
class _Click:
    """One button click, as a verified ``block_actions`` payload says it."""

    user: str
    channel_id: str
    action_ts: str
    value: ButtonValue
    response_url: str | None = None
    """Where the person who clicked is replied to (None: not a URL of the channel's hooks)."""


def slack_router(
    service: ApprovalService,
    slack: SlackApp,
    security: Security,
    *,
    path: str = "/slack/interactions",
) -> APIRouter:
    """The interaction endpoint for ``slack``'s channels.

    Args:
        service: the approval service that records the clicks and resumes the runs.
        slack: the Slack app channels and users.
        security: bounds the body.
        path: the route (set the app's Interactivity Request URL to it).
    """
    from slack_sdk.signature import SignatureVerifier

    router = APIRouter()
    authority, resumes = service.authority, service.resumes
    verifiers = [(item, SignatureVerifier(item.signing_secret)) for item in slack.channels]

    @router.post(path)
    async def interactions(request: Request) -> JSONResponse:
        body = await security.read_body(request)
        text, channels, signed_at = _verified(verifiers, body, request.headers)
        click, channel = _click(text, channels, signed_at)
        principal = slack.principal_of(click.user)
        if principal is None:
            logger.info(
                "slack channel %s: a click by a Slack user not in slack_users", channel.name
            )
            answer = _said("aais.slack_user", "you are not mapped to an approver; nothing recorded")
        else:
            answer = await _answer(click, principal)
        if click.response_url is not None:
            # Sent after the answer (Slack waits three seconds for it), in a worker thread.
            answer.background = BackgroundTask(
                _reply, channel.name, click.response_url, answer.reply
            )
        return answer

    async def _answer(click: _Click, principal: Principal) -> _Answer:
        value = click.value
        requested = await authority.aget_request(value.request_id)
        if requested is None:
            return _said("aais.unknown_request", "no such approval request")
        if requested.request.action_digest != value.action_digest:
            message = "/actions/0/value: the digest shown is not the requested action's"
            return _said("aais.digest_mismatch", message)
        if not await authority.access.amay_view(principal, value.request_id):
            return _said("aais.forbidden", "you may not answer this request")
        recorded = await authority.aget_resolution(value.request_id)
        if recorded is not None and recorded.resolution.decision_id == _decision_id(click):
            return _resolved(recorded)  # this very click, sent again: the same resolution
        if recorded is not None:
            outcome = recorded.resolution.outcome
            return _said("aais.conflict", f"this request was already resolved: {outcome}")
        try:
            decided = build_decision(
                requested,
                decision=value.decision,  # type: ignore[arg-type]  # validated by the model
                scope=value.scope,  # type: ignore[arg-type]
                actor=principal.actor,
                decision_id=_decision_id(click),
                decided_at=_moment(click.action_ts),
            )
        except AAISValidationError:
            return _said("aais.slack_payload", "/actions/0/value: not an answer AAIS knows")
        try:
            _, resolved = await arecord_decision(
                authority, json.dumps(decided.to_json()), principal, request_id=value.request_id
            )
        except DecisionRefused as refusal:
            return _said(refusal.code, refusal.message)
        outcome = resolved.resolution.outcome
        if outcome in TERMINAL or outcome == "conflict":
            resumes.later(value.request_id)
        return _resolved(resolved)

    return router


def _resolved(resolved: ApprovalResolved) -> _Answer:
    """The resolution a click got, for the person who clicked and as the profile's status."""
    outcome = resolved.resolution.outcome
    document = {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": f"{outcome}: {resolved.resolution.message}",
        "resolution": resolved.to_json(),
    }
    try:  # an answer the authority resolved conflict, stale, invalid or expired
        reply = REFUSALS[outcome_refusal(outcome)].meaning
    except KeyError:
        reply = f"Your answer was recorded: the request is {outcome}."
    return _Answer(document, _STATUS.get(outcome, 200), reply=reply)


class _Answer(JSONResponse):
    """The answer to a click, with what its ephemeral reply tells the person who clicked:
    the catalogue's meaning of a refusal, or that their answer was recorded (the outcome
    alone: no value of the request or the payload)."""

    def __init__(self, document: dict[str, Any], status_code: int, *, reply: str) -> None:
        super().__init__(document, status_code=status_code)
        self.reply = reply


def _reply(channel: str, url: str, text: str) -> None:
    """Post ``text`` as an ephemeral reply to ``url`` (best effort: one attempt, logged)."""
    from slack_sdk.errors import SlackClientError
    from slack_sdk.webhook import WebhookClient

    try:
        sent = WebhookClient(url, timeout=_REPLY_TIMEOUT).send(
            text=text, response_type="ephemeral", replace_original=False
        )
    except (OSError, ValueError, SlackClientError) as error:
        logger.info("slack channel %s: a click's reply failed (%s)", channel, type(error).__name__)
        return
    if sent.status_code != 200:
        logger.info("slack channel %s: a click's reply got HTTP %s", channel, sent.status_code)


def _verified(
    verifiers: list[tuple[SlackChannel, Any]], body: bytes, headers: Mapping[str, str]
) -> tuple[str, list[SlackChannel], int]:
    """The body as text, the channels whose signing secret verifies it and its timestamp
    (channels of one Slack app share a secret), and the signed moment; else 401. A body
    that is not UTF-8 or a signature that is not ASCII verifies for no secret."""
    timestamp = headers.get("x-slack-request-timestamp")
    signature = headers.get("x-slack-signature")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if (
        text is not None
        and timestamp is not None
        and signature is not None
        and 0 < len(timestamp) <= _TIMESTAMP_DIGITS
        and timestamp.isascii()
        and timestamp.isdigit()
        and signature.isascii()
        and signature.isprintable()
    ):
        channels = [
            channel
            for channel, verifier in verifiers
            if verifier.is_valid(body=text, timestamp=timestamp, signature=signature)
        ]
        if channels:
            return text, channels, int(timestamp)
    raise refused(
        "aais.slack_signature",
        "X-Slack-Signature: does not verify, or X-Slack-Request-Timestamp is not recent",
    )


def _click(text: str, channels: list[SlackChannel], signed_at: int) -> tuple[_Click, SlackChannel]:
    """The one button click of a verified body, read strictly, and the channel it was
    clicked in among ``channels`` (those whose secret verified the body), or 422."""
    try:
        form = parse_qs(text, strict_parsing=True, max_num_fields=2)
    except ValueError:
        raise _bad("payload: the body is not a form with one payload field") from None
    if list(form) != ["payload"] or len(form["payload"]) != 1:
        raise _bad("payload: the body is not a form with one payload field")
    try:
        payload = loads_strict(form["payload"][0])
    except AAISValidationError as error:
        raise _bad(f"payload{error.pointer}: not I-JSON") from None
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        raise _bad("/type: only block_actions payloads are answered")
    user = _member(payload, "user", "id")
    channel_id = _member(payload, "channel", "id")
    channel = next((item for item in channels if item.channel == channel_id), None)
    if channel is None:
        raise _bad("/channel/id: not the channel of the app whose secret signed it")
    if channel.team is not None and _member(payload, "team", "id") != channel.team:
        raise _bad("/team/id: not the Slack workspace of the channel")
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise _bad("/actions: must hold the one button clicked")
    action = actions[0]
    if not str(action.get("action_id", "")).startswith("aais_"):
        raise _bad("/actions/0/action_id: not a button of this app")
    action_ts = action.get("action_ts")
    moment = _moment(action_ts) if isinstance(action_ts, str) else None
    if moment is None or abs(moment.timestamp() - signed_at) > _CLICK_SKEW:
        raise _bad("/actions/0/action_ts: must be Slack's epoch seconds of the signed moment")
    try:
        value = ButtonValue.decode(action.get("value"))
    except ValueError as error:
        raise _bad(str(error)) from None
    response_url = payload.get("response_url")
    reply_to = response_url if channel.replies_to(response_url) else None
    assert isinstance(action_ts, str)
    return _Click(user, channel_id, action_ts, value, reply_to), channel


def _member(payload: dict[str, Any], key: str, inner: str) -> str:
    found = payload.get(key)
    value = found.get(inner) if isinstance(found, dict) else None
    if not isinstance(value, str) or not value or len(value) > _SLACK_ID or not value.isalnum():
        raise _bad(f"/{key}/{inner}: must be a Slack id")
    return value


def _moment(action_ts: str) -> datetime | None:
    """Slack's ``action_ts`` (epoch seconds, ``1548426417.840180``) as a UTC moment."""
    whole, _, part = action_ts.partition(".")
    if not (whole.isascii() and whole.isdigit() and len(whole) <= _TIMESTAMP_DIGITS):
        return None
    if part and not (part.isascii() and part.isdigit() and len(part) <= 9):
        return None
    seconds = float(action_ts)
    if not math.isfinite(seconds):  # pragma: no cover - digits are finite
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):  # beyond the dates this platform holds
        return None


def _decision_id(click: _Click) -> str:
    """The same id for the same click: a replayed body is an identical duplicate."""
    value = click.value
    parts = (click.user, click.channel_id, click.action_ts, value.request_id)
    seed = "\n".join((*parts, value.decision, value.scope))
    return f"dec_slack_{hashlib.sha256(seed.encode()).hexdigest()[:32]}"


def _bad(message: str) -> HTTPException:
    return refused("aais.slack_payload", message)


def _said(code: str, message: str) -> _Answer:
    """A refusal as Slack's person sees it (an ephemeral text) and as the catalogue
    says it (status and ``error``); nothing was recorded."""
    status, error = http_refusal(code, message)
    document = {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": message,
        "error": error,
    }
    return _Answer(document, status, reply=REFUSALS[code].meaning)
