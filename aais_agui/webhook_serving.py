"""The webhook sender a server runs for the subscriptions of its access-policy file.

``aais-agui serve --access-policy FILE`` reads the file's ``[[webhooks]]``
(:func:`aais_langgraph.webhooks.load_webhooks`), records deliveries with every
request and resolution its ledger writes, and runs a
:class:`~aais_langgraph.webhooks.WebhookWorker` while it serves. Replicas given
the same file share the work: each delivery is claimed by one sender at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aais_langgraph.authority import ApprovalAuthority

__all__ = ["serving_webhooks", "webhook_worker"]


def webhook_worker(authority: ApprovalAuthority, policy_path: str | None) -> Any:
    """The sender for the subscriptions in ``policy_path`` (None when it names none), with
    the ledger set to record their deliveries; SystemExit names a bad setting."""
    if policy_path is None:
        return None
    from aais_langgraph.webhooks import SubscriptionPlan, WebhookWorker, load_webhooks

    try:
        subscriptions = load_webhooks(policy_path)
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None
    if not subscriptions:
        return None
    authority.ledger.delivery_plan = SubscriptionPlan(subscriptions)
    return WebhookWorker(authority, subscriptions)


@asynccontextmanager
async def serving_webhooks(worker: Any) -> AsyncIterator[None]:
    """Run ``worker`` (a :class:`~aais_langgraph.webhooks.WebhookWorker`, or None) for the
    duration of the block."""
    if worker is None:
        yield
        return
    async with worker.running():
        yield
