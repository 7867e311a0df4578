"""The webhook sender: claims the ledger's due deliveries, signs them and POSTs them.

Any process serving the graph may run a :class:`WebhookWorker` (``aais-agui serve``
does, for the subscriptions of its ``--access-policy`` file). Each pass first
records the deliveries a writer without the subscriptions missed, from the event
stream after each subscription's cursor (:mod:`.catch_up`), then claims due
deliveries for a short while (``claim_ttl``), so two replicas do not both send one;
a sender that dies mid-delivery leaves its claim to expire and another sends it
again with the same ``webhook-id`` (at least once: receivers drop duplicates by id).

One attempt, in order: the request as the ledger vouches for it (gone: skipped);
an expiry notice for a request no longer pending, or past its expiry, is skipped;
the subscription's principal must be allowed to ``view`` the request, and with
``groups`` the policy must let one of the groups decide it, asked of the policy
about each group as such (:meth:`~aais_langgraph.authority.Access.deciding_groups`;
else skipped; a principal that may not view is logged once per subscription,
without values); then the
body (:mod:`.formats`) is signed per Standard Webhooks (``webhook-id``,
``webhook-timestamp``, ``webhook-signature``, with the ``standardwebhooks``
library) and POSTed, or for an email subscription the message (:mod:`.mail`) is sent
by SMTP. A reminder or an escalation notice for a request resolved or past its
expiry is skipped, as an expiry notice is. A requester notice goes to the
requester's address (``[requesters.addresses]``) and shows only what the requester
may ``view`` (skipped otherwise). A 2xx answer (an accepted message) delivers it;
anything else backs off
(``retry_base`` doubling up to ``retry_max``) until ``max_attempts``, then it is
``dead`` and waits for ``aais-langgraph webhooks retry``. A message that cannot be
built (:class:`~.mail.MessageNotBuilt`), and any error an attempt raises, is a failed
attempt like any other: it counts, backs off and ends ``dead``. Errors are recorded as a
status code or an error type, never a URL (a Slack URL is itself a secret) or a value.

A Slack app channel (:class:`~.slack_app.SlackChannel`, given among the subscriptions)
goes through the same claims, checks and backoff, and calls Slack's Web API with
``slack_sdk`` instead of POSTing: ``approval.requested`` is ``chat.postMessage``
(:func:`~.slack_messages.request_message`; a request resolved before it was posted is
posted resolved), and the message's channel and ``ts`` are kept as the delivery's
result; ``approval.resolved`` is ``chat.update`` of that message
(:func:`~.slack_messages.resolved_message`), tried again while the post is still
pending, skipped when the request was never posted (a dead post handed back later
posts the resolved message). Slack's error code (``ok: false``)
is the recorded error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import smtplib
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, cast

import httpx
from standardwebhooks.webhooks import Webhook

from ..authority import ApprovalAuthority, Principal
from ..authority.authorization import requester_of
from ..ledger import LedgerIntegrityError
from ..ledger.deliveries import Delivery, DeliveryNotice, delivery_id_for
from ..ledger.outbox import (
    DELIVERY,
    Backoff,
    WorkChange,
    retried_change,
    settled_change,
    skipped_change,
)
from ..observability import delivery_span
from ..observability.traces import SpanNotes
from ..protocol import Actor, ApprovalRequested, ApprovalResolved
from .catch_up import catch_up
from .formats import aais_body, slack_body
from .mail import MessageNotBuilt, email_message, send_mail
from .slack_app import SlackChannel
from .slack_messages import request_message, resolved_message
from .subscriptions import WebhookSubscription

__all__ = ["WebhookWorker", "signed_headers"]

logger = logging.getLogger(__name__)

_NOT_VISIBLE = "the subscription's principal may not view the request"
_SLACK_ERROR = re.compile(r"[a-z_]{1,64}")
"""Slack's error codes (``channel_not_found``): kept as the error; anything else is not."""
_SLACK_ID = re.compile(r"[A-Z0-9]{1,64}")
_SLACK_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,9}")
"""A posted message's channel id and ``ts``, as Slack names them (kept to rewrite it)."""

_RESULTS = {"pending": "failed", "dead": "dead", "delivered": "delivered", "skipped": "skipped"}
"""The span's result for the state an attempt left the delivery in."""


def signed_headers(secret: str, webhook_id: str, body: str, *, now: float) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: its id, its moment, its signature.

    Args:
        secret: the subscription's Standard Webhooks secret.
        webhook_id: the delivery's id.
        body: the exact body sent.
        now: the moment signed (epoch seconds).
    """
    moment = datetime.fromtimestamp(now, tz=timezone.utc)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(now)),
        "webhook-signature": Webhook(secret).sign(webhook_id, moment, body),
    }


class WebhookWorker:
    """Delivers the ledger's due webhook deliveries for ``subscriptions``.

    Args:
        authority: The authority whose ledger holds the deliveries; its authorizer
            decides what each subscription's principal may view.
        subscriptions: The receivers (their names match the deliveries' ``subscription``):
            webhook subscriptions and Slack app channels.
        holder: Who claims deliveries (default: host, process and a random part).
        claim_ttl: Seconds a claim holds; longer than ``timeout``.
        timeout: Seconds one POST may take (a slow receiver counts as failed).
        retry_base: Seconds before the second attempt; doubles per failure.
        retry_max: The longest wait between attempts.
        batch: Deliveries claimed per pass at most.
        poll_interval: Seconds between passes of :meth:`run`.
        concurrency: Deliveries in flight at once.
        catch_up_limit: Events read per subscription and pass when catching up.
        requester_addresses: Requester id -> email address, for requester notices
            (default: the ``[requesters.addresses]`` of the ledger's plan's policy).
        clock: The current time in epoch seconds (default: :func:`time.time`); give the
            authority's when follow-ups run on it.
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        subscriptions: Iterable[WebhookSubscription | SlackChannel],
        *,
        holder: str | None = None,
        claim_ttl: float = 30.0,
        timeout: float = 10.0,
        retry_base: float = 1.0,
        retry_max: float = 300.0,
        batch: int = 20,
        poll_interval: float = 0.5,
        concurrency: int = 8,
        catch_up_limit: int = 500,
        requester_addresses: Mapping[str, str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not 0 < timeout < claim_ttl:
            raise ValueError("timeout: must be positive and shorter than claim_ttl")
        self.authority = authority
        given = list(subscriptions)
        self.slack = {item.name: item for item in given if isinstance(item, SlackChannel)}
        self.subscriptions = {
            item.name: item.subscription if isinstance(item, SlackChannel) else item
            for item in given
        }
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.claim_ttl = claim_ttl
        self.timeout = timeout
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.batch = batch
        self.poll_interval = poll_interval
        self.concurrency = concurrency
        self.catch_up_limit = catch_up_limit
        if requester_addresses is None:
            policy = getattr(authority.ledger.delivery_plan, "policy", None)
            found = getattr(policy, "requester_addresses", ())
            requester_addresses = dict(found)
        self.requester_addresses = dict(requester_addresses)
        self.clock = clock or time.time
        self._client = httpx.Client(timeout=timeout, follow_redirects=False)
        self._lock = threading.Lock()
        self._not_visible_said: set[str] = set()
        self._no_history_said: set[str] = set()
        self._slack_bots: dict[str, str] = {}
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._slack_clients: dict[str, Any] = {}

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    # -- one pass ----------------------------------------------------------------------

    def claim(self, *, limit: int | None = None) -> list[Delivery]:
        """Claim due deliveries of this worker's subscriptions (at most ``limit``)."""
        return self.authority.ledger.claim_work(
            DELIVERY,
            self.holder,
            targets=tuple(sorted(self.subscriptions)),
            ttl=self.claim_ttl,
            now=self.clock(),
            limit=self.batch if limit is None else limit,
        )

    def catch_up(self) -> int:
        """Record the deliveries of the events after each subscription's cursor (those a
        writer without the subscriptions did not record); how many were recorded."""
        ledger = self.authority.ledger
        return sum(catch_up(ledger, item, limit=self.catch_up_limit) for item in self._sorted())

    def _sorted(self) -> list[WebhookSubscription]:
        return [self.subscriptions[name] for name in sorted(self.subscriptions)]

    def deliver_due(self) -> list[Delivery]:
        """One pass: catch up, claim what is due and attempt each; the rows after the attempts."""
        self.catch_up()
        claimed = self.claim()
        if not claimed:
            return []
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(claimed))) as pool:
            settled = list(pool.map(self.deliver, claimed))
        return [item for item in settled if item is not None]

    async def adeliver_due(self) -> list[Delivery]:
        """Async twin of :meth:`deliver_due` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.deliver_due)

    def deliver(self, delivery: Delivery) -> Delivery | None:
        """One attempt of a claimed delivery, in an ``aais.delivery`` span; the row after it."""
        with delivery_span(
            delivery_id=delivery.work_id,
            event_type=str(delivery.topic),
            attempt=delivery.attempts + 1,
            request_id=delivery.request_id,
        ) as notes:
            try:
                change = self._attempt(delivery, notes)
            except Exception as error:
                # An attempt always ends in a recorded change: raised here, it would leave
                # the row claimed with no attempt counted, sent again for ever, never dead.
                change = self._raised(delivery, error)
            after = self.authority.ledger.update_work(DELIVERY, delivery.work_id, change)
            result = "error" if after is None else _RESULTS.get(after.shown_state, after.state)
            notes.set("aais.delivery.result", result)
        return after

    def _raised(self, delivery: Delivery, error: Exception) -> WorkChange:
        """A failed attempt for an error no step expected (its type, never its words)."""
        name = str(delivery.target)
        logger.error("webhook %s: an attempt raised %s", name, type(error).__name__)
        subscription = self.subscriptions.get(name)
        return retried_change(
            f"the attempt raised {type(error).__name__}",
            self.clock(),
            backoff=Backoff(first=self.retry_base, most=self.retry_max),
            holder=self.holder,
            max_attempts=None if subscription is None else subscription.max_attempts,
        )

    def _attempt(self, delivery: Delivery, notes: SpanNotes) -> WorkChange:
        now = self.clock()
        subscription = self.subscriptions.get(str(delivery.target))
        if subscription is None:  # pragma: no cover - claims name known subscriptions only
            return skipped_change("the subscription is no longer configured", now)
        try:
            if subscription.format == "slack_app":
                return self._slack_attempt(self.slack[subscription.name], delivery, now)
            told = self._told(subscription, delivery, now)
        except _Skipped as skipped:
            if skipped.reason == _NOT_VISIBLE:
                self._say_not_visible(subscription)
            return skipped_change(skipped.reason, now)
        except LedgerIntegrityError:
            return self._failed(subscription, delivery, "the ledger does not vouch for the request")
        if subscription.mail is not None:
            return self._mail(subscription, delivery, told)
        body = self._body(subscription, told, now)
        headers = {"content-type": "application/json", "user-agent": "aais-langgraph-webhooks"}
        if subscription.secret:
            # Signed at the real moment: receivers check it against their own clocks.
            signed = signed_headers(subscription.secret, delivery.work_id, body, now=time.time())
            headers.update(signed)
        else:
            headers["webhook-id"] = delivery.work_id
        try:
            answer = self._client.post(subscription.url, content=body.encode(), headers=headers)
        except httpx.HTTPError as error:
            return self._failed(subscription, delivery, type(error).__name__)
        notes.set("aais.delivery.status_code", answer.status_code)
        if 200 <= answer.status_code < 300:
            return settled_change("done", self.clock(), counted=True)
        return self._failed(subscription, delivery, f"HTTP {answer.status_code}")

    def _mail(
        self, subscription: WebhookSubscription, delivery: Delivery, told: _Told
    ) -> WorkChange:
        """Send the delivery's message by SMTP: done once the server accepted it."""
        mail = subscription.mail
        assert mail is not None
        try:
            message = email_message(
                told.notice,
                told.requested,
                told.resolved,
                sender=mail.sender,
                to=told.recipients or mail.to,
                message_id=delivery.work_id,
                inbox_url=subscription.inbox_url,
                include_arguments=subscription.include_arguments,
            )
        except MessageNotBuilt as error:
            return self._failed(subscription, delivery, f"the message cannot be built ({error})")
        try:
            send_mail(mail, message, timeout=self.timeout)
        except (smtplib.SMTPException, OSError) as error:
            return self._failed(subscription, delivery, type(error).__name__)
        return settled_change("done", self.clock(), counted=True)

    def _say_not_visible(self, subscription: WebhookSubscription) -> None:
        """Warn, once per subscription, that its principal is not shown some requests: a
        subscription that sends nothing otherwise looks like one with nothing to send."""
        with self._lock:
            if subscription.name in self._not_visible_said:
                return
            self._not_visible_said.add(subscription.name)
        logger.warning(
            "webhook %r: its principal may not view a request, so that notice is skipped "
            "(said once; webhooks list --state skipped lists each)",
            subscription.name,
        )

    def _failed(
        self, subscription: WebhookSubscription, delivery: Delivery, error: str
    ) -> WorkChange:
        logger.info("webhook %s: attempt failed (%s)", subscription.name, error)
        return retried_change(
            error,
            self.clock(),
            backoff=Backoff(first=self.retry_base, most=self.retry_max),
            holder=self.holder,
            max_attempts=subscription.max_attempts,
        )

    def _told(self, subscription: WebhookSubscription, delivery: Delivery, now: float) -> _Told:
        """What the delivery tells, once it may be told; :class:`_Skipped` says why not."""
        authority = self.authority
        requested = authority.get_request(delivery.request_id)
        if requested is None:
            raise _Skipped("the request is no longer stored")
        resolved = authority.get_resolution(delivery.request_id)
        notice = cast("DeliveryNotice", delivery.topic)
        if notice in ("approval.expiring", "approval.reminder", "approval.escalated"):
            if resolved is not None:
                raise _Skipped("the request was resolved before the notice was sent")
            if authority.expiry_of(requested.request).timestamp() <= now:
                raise _Skipped("the request expired before the notice was sent")
        access = authority.access
        if notice == "approval.requester_notice":
            return self._to_requester(notice, requested, resolved, delivery.request_id)
        if not access.may_view(subscription.principal, delivery.request_id):
            raise _Skipped(_NOT_VISIBLE)
        if subscription.groups:
            deciding = access.deciding_groups(requested.request, subscription.groups)
            if deciding is None:
                raise _Skipped("the authorizer cannot say which groups decide the request")
            if not deciding:
                raise _Skipped("none of the subscription's groups decides the request")
        return _Told(notice, requested, resolved)

    def _to_requester(
        self,
        notice: DeliveryNotice,
        requested: ApprovalRequested,
        resolved: ApprovalResolved | None,
        request_id: str,
    ) -> _Told:
        """A requester notice: to the requester's address, showing what they may view."""
        requester = requester_of(requested.request)
        if requester is None:
            stored = self.authority.ledger.get_request(request_id)
            found = None if stored is None else stored.context.get("requester")
            requester = found if isinstance(found, str) else None
        if requester is None or resolved is None:
            raise _Skipped("the request names no requester, or is not resolved")
        address = self.requester_addresses.get(requester)
        if address is None:
            raise _Skipped("the requester has no address ([requesters.addresses])")
        principal = Principal(Actor(id=requester, type="human"))
        if not self.authority.access.may_view(principal, request_id):
            raise _Skipped("the requester may not view the request")
        return _Told(notice, requested, resolved, recipients=(address,))

    def _body(self, subscription: WebhookSubscription, told: _Told, now: float) -> str:
        """The JSON text to send."""
        if subscription.format == "slack":
            payload = slack_body(
                told.notice,
                told.requested,
                told.resolved,
                inbox_url=subscription.inbox_url,
                include_arguments=subscription.include_arguments,
            )
        else:
            payload = aais_body(told.notice, told.requested, told.resolved, now)
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))

    # -- Slack app channels ------------------------------------------------------------

    def _slack_attempt(self, channel: SlackChannel, delivery: Delivery, now: float) -> WorkChange:
        """Post the request's message, or rewrite it with the resolution."""
        from slack_sdk.errors import SlackApiError, SlackClientError

        subscription = self.subscriptions[channel.name]
        told = self._told(subscription, delivery, now)
        requested, resolved = told.requested, told.resolved
        include = channel.include_arguments
        client = self._slack_client(channel)
        try:
            if delivery.topic == "approval.requested":
                if resolved is None:
                    message = request_message(requested, include_arguments=include)
                else:
                    message = self._resolved(requested, resolved, include)
                posted = self._posted_before(client, channel, delivery, now)
                if posted is None:
                    answer = client.chat_postMessage(
                        channel=channel.channel,
                        unfurl_links=False,
                        unfurl_media=False,
                        metadata=_post_metadata(delivery),
                        **message,
                    )
                    where, ts = answer.get("channel"), answer.get("ts")
                    if not _SLACK_ID.fullmatch(str(where)) or not _SLACK_TS.fullmatch(str(ts)):
                        unnamed = "slack answered without the message's channel and ts"
                        return self._failed(subscription, delivery, unnamed)
                    posted = f"{where} {ts}"
                return settled_change("done", time.time(), counted=True, result=posted)
            if resolved is None:  # pragma: no cover - a resolved notice has its resolution
                raise _Skipped("the request has no resolution")
            post = self.authority.ledger.get_work(
                DELIVERY, delivery_id_for(channel.name, "approval.requested", delivery.request_id)
            )
            if post is None or post.state in ("skipped", "coalesced", "dead"):
                raise _Skipped("the request's message was never posted")
            if post.result is None:
                waiting = "the request's message is not posted yet"
                return self._failed(subscription, delivery, waiting)
            where, ts = post.result.split(" ", 1)
            message = self._resolved(requested, resolved, include)
            client.chat_update(channel=where, ts=ts, **message)
        except SlackApiError as error:
            code = error.response.get("error") if isinstance(error.response.data, dict) else None
            known = isinstance(code, str) and _SLACK_ERROR.fullmatch(code) is not None
            return self._failed(subscription, delivery, f"slack {code if known else 'error'}")
        except (SlackClientError, OSError) as error:
            return self._failed(subscription, delivery, type(error).__name__)
        return settled_change("done", time.time(), counted=True)

    def _posted_before(
        self, client: Any, channel: SlackChannel, delivery: Delivery, now: float
    ) -> str | None:
        """The ``"<channel> <ts>"`` of the message an earlier attempt of ``delivery``
        posted, found by its metadata in the channel's history; None when none did, or
        when no earlier attempt can have reached Slack (the first attempt of a delivery
        younger than a claim), or when the history cannot be read (the app lacks
        ``channels:history`` / ``groups:history``: said once per channel)."""
        from slack_sdk.errors import SlackApiError

        if delivery.attempts == 0 and now - delivery.created_at < self.claim_ttl:
            return None
        cursor: str | None = None
        try:
            ours = self._bot_id(client, channel)
            if ours is None:
                self._say_no_history(channel, "not_a_bot_token")
                return None
            for _ in range(_HISTORY_PAGES):
                page = client.conversations_history(
                    channel=channel.channel,
                    oldest=f"{max(0.0, delivery.created_at - _HISTORY_SLACK):.6f}",
                    include_all_metadata=True,
                    limit=200,
                    **({"cursor": cursor} if cursor else {}),
                )
                for message in page.get("messages") or ():
                    if _is_post_of(message, delivery, bot_id=ours):
                        return f"{page.get('channel') or channel.channel} {message['ts']}"
                cursor = (page.get("response_metadata") or {}).get("next_cursor")
                if not page.get("has_more") or not cursor:
                    return None
        except SlackApiError as error:
            code = error.response.get("error") if isinstance(error.response.data, dict) else None
            known = isinstance(code, str) and _SLACK_ERROR.fullmatch(code) is not None
            self._say_no_history(channel, str(code) if known else "error")
        return None

    def _bot_id(self, client: Any, channel: SlackChannel) -> str | None:
        """The ``bot_id`` of the channel's token (``auth.test``, asked once per channel;
        None for a token of no bot): only a message this bot posted is taken for an
        earlier post."""
        with self._lock:
            known = self._slack_bots.get(channel.name)
        if known is None:
            found = client.auth_test().get("bot_id")
            if not isinstance(found, str) or not found:
                return None
            known = found
            with self._lock:
                self._slack_bots[channel.name] = known
        return known

    def _say_no_history(self, channel: SlackChannel, code: str) -> None:
        """Warn, once per channel, that a retried post cannot be matched to its message."""
        with self._lock:
            if channel.name in self._no_history_said:
                return
            self._no_history_said.add(channel.name)
        logger.warning(
            "slack %r: cannot read the channel's history (slack %s), so a post retried after "
            "a crash may appear twice (give the app channels:history or groups:history)",
            channel.name,
            code,
        )

    def _resolved(
        self, requested: ApprovalRequested, resolved: ApprovalResolved, include: bool
    ) -> dict[str, Any]:
        decided_by = self.authority.decided_by(resolved)
        return resolved_message(
            requested, resolved, decided_by=decided_by, include_arguments=include
        )

    def _slack_client(self, channel: SlackChannel) -> Any:
        """The channel's Web API client (one per channel, made on first use)."""
        from slack_sdk import WebClient

        with self._lock:
            client = self._slack_clients.get(channel.name)
            if client is None:
                client = WebClient(
                    token=channel.token,
                    base_url=channel.api_url,
                    timeout=max(1, math.ceil(self.timeout)),
                )
                self._slack_clients[channel.name] = client
            return client

    # -- in the background -------------------------------------------------------------

    async def asend_due(self) -> None:
        """One pass: catch up from the events, then claim what room ``concurrency`` leaves
        and start sending it (the sends go on in the background)."""
        try:
            await asyncio.to_thread(self.catch_up)
        except Exception:
            logger.exception("webhook worker: catching up from the events failed; retrying")
        try:
            room = self.concurrency - len(self._in_flight)
            if room > 0:
                for delivery in await asyncio.to_thread(self.claim, limit=min(room, self.batch)):
                    task = asyncio.ensure_future(asyncio.to_thread(self.deliver, delivery))
                    self._in_flight.add(task)
                    task.add_done_callback(self._in_flight.discard)
                    task.add_done_callback(_log_failure)
        except Exception:
            logger.exception("webhook worker: reading the ledger failed; retrying")

    async def run(self) -> None:
        """Claim and send until cancelled; up to ``concurrency`` deliveries in flight."""
        while True:
            await self.asend_due()
            await asyncio.sleep(self.poll_interval)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[WebhookWorker]:
        """Run :meth:`run` in the background for the duration of the block."""
        task = asyncio.create_task(self.run(), name="aais-webhook-worker")
        try:
            yield self
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            self.close()


@dataclass(frozen=True)
class _Told:
    """What one delivery tells, and to whom when not to the subscription's own ``to``."""

    notice: DeliveryNotice
    requested: ApprovalRequested
    resolved: ApprovalResolved | None
    recipients: tuple[str, ...] = ()


class _Skipped(Exception):
    """A delivery not to be sent, and why (words that hold no value)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error(
            "webhook worker: a delivery attempt failed: %s", type(task.exception()).__name__
        )


_POST_EVENT = "aais_approval_requested"
"""The ``event_type`` of the metadata each posted request carries."""
_HISTORY_PAGES = 5
"""How many pages (of 200 messages) of a channel's history a retried post reads."""
_HISTORY_SLACK = 60.0
"""Seconds before the delivery's creation the history is read from (clock skew)."""


def _post_metadata(delivery: Delivery) -> dict[str, Any]:
    """The message metadata that lets a retried post find the message an earlier
    attempt posted: the delivery's id and request id (no secret, no argument value)."""
    return {
        "event_type": _POST_EVENT,
        "event_payload": {"delivery_id": delivery.work_id, "request_id": delivery.request_id},
    }


def _is_post_of(message: Any, delivery: Delivery, *, bot_id: str) -> bool:
    """Whether a message of the channel's history is the post of ``delivery``: posted by
    this bot (another app could post the same metadata) and carrying its id."""
    if not isinstance(message, dict) or not isinstance(message.get("ts"), str):
        return False
    if message.get("bot_id") != bot_id:
        return False
    metadata = message.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("event_type") != _POST_EVENT:
        return False
    payload = metadata.get("event_payload")
    return isinstance(payload, dict) and payload.get("delivery_id") == delivery.work_id
