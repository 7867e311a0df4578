"""The webhook sender a server runs for the subscriptions of its access-policy file.

``aais-agui serve --access-policy FILE`` reads the file's ``[[webhooks]]``
(:func:`aais_langgraph.webhooks.load_webhooks`), records deliveries with every
request and resolution its ledger writes, and runs a
:class:`~aais_langgraph.webhooks.WebhookWorker` while it serves. Replicas given
the same file share the work: each delivery is claimed by one sender at a time.
``create_app(..., webhooks=...)`` does the same for subscriptions given in code
(:func:`with_webhooks`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from aais_langgraph.authority import ApprovalAuthority

if TYPE_CHECKING:
    from aais_langgraph.webhooks import WebhookSubscription, WebhookWorker

__all__ = ["serving_webhooks", "webhook_worker", "with_webhooks"]

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


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
    # The ledger's constructor takes the plan; this ledger was built before it was known.
    authority.ledger._delivery_plan = SubscriptionPlan(subscriptions)
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


def with_webhooks(
    lifespan: Lifespan | None,
    authority: ApprovalAuthority,
    webhooks: Iterable[WebhookSubscription] | WebhookWorker | None,
) -> Lifespan | None:
    """``lifespan`` with the sender for ``webhooks`` running around it, and the ledger of
    ``authority`` set to record their deliveries (``lifespan`` itself when there are none).

    ``webhooks`` is a list of subscriptions (a worker with the default settings is made
    each time the app starts) or a :class:`~aais_langgraph.webhooks.WebhookWorker` of
    ``authority`` (closed when the app stops); ValueError names a worker of another.
    """
    if webhooks is None:
        return lifespan
    from aais_langgraph.webhooks import SubscriptionPlan, WebhookWorker

    given = None
    if isinstance(webhooks, WebhookWorker):
        if webhooks.authority is not authority:
            raise ValueError("webhooks: the worker must send for the app's authority")
        given, subscriptions = webhooks, list(webhooks.subscriptions.values())
    else:
        subscriptions = list(webhooks)
    if not subscriptions:
        return lifespan
    # The ledger's constructor takes the plan; this ledger was built before it was known.
    authority.ledger._delivery_plan = SubscriptionPlan(subscriptions)

    @asynccontextmanager
    async def sending(app: Any) -> AsyncIterator[None]:
        worker = given if given is not None else WebhookWorker(authority, subscriptions)
        async with worker.running():
            if lifespan is None:
                yield
            else:
                async with lifespan(app):
                    yield

    return sending
