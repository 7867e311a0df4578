"""Signed webhooks as durable work: subscriptions, bodies, and the sender.

A subscription (a ``[[webhooks]]`` table of the access-policy file, or
:class:`WebhookSubscription` in code) is told about new requests, resolutions and
requests that expire soon, by signed POST, Slack JSON or email (:mod:`.mail`); and
:class:`FollowUpRunner` runs the reminders, escalations and requester notices the
access policy's rules ask for (:mod:`.follow_ups`). :class:`SubscriptionPlan`, given
to the ledger's constructor (``delivery_plan=``), records each delivery in the same transaction
as the request or resolution that causes it; :class:`WebhookWorker` signs and
sends them (Standard Webhooks), retried with backoff across restarts and
replicas until delivered or dead (:mod:`aais_langgraph.ledger.deliveries`),
and records those a writer without the plan missed from the event stream
(:mod:`.catch_up`). A ``[[slack]]`` channel (:mod:`.slack_app`) is one more target of
the same deliveries: its requests are posted to Slack with answer buttons and
rewritten once resolved (:mod:`.slack_messages`).
Needs the ``notify`` extra (and ``slack`` for Slack app channels).
"""

from .follow_ups import FollowUpRunner
from .formats import aais_body, slack_body
from .mail import MailSettings, email_message
from .slack_app import SlackApp, SlackChannel, load_slack, slack_from_mapping
from .slack_messages import ButtonValue, request_message, resolved_message
from .subscriptions import (
    SubscriptionPlan,
    WebhookSubscription,
    load_plan,
    load_webhooks,
    webhooks_from_mapping,
)
from .worker import WebhookWorker, signed_headers

__all__ = [
    "ButtonValue",
    "FollowUpRunner",
    "MailSettings",
    "SlackApp",
    "SlackChannel",
    "SubscriptionPlan",
    "WebhookSubscription",
    "WebhookWorker",
    "aais_body",
    "email_message",
    "load_plan",
    "load_slack",
    "load_webhooks",
    "request_message",
    "resolved_message",
    "signed_headers",
    "slack_body",
    "slack_from_mapping",
    "webhooks_from_mapping",
]
