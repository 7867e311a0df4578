"""``aais-agui``: serve the demo agent or your own graph with AG-UI, the AAIS profile and the inbox.

    aais-agui demo  [--host 127.0.0.1] [--port 8000] [--db ./aais-demo.db] [--workspace DIR]
    aais-agui serve pkg.module:graph (--token-env VAR | --local-dev-login) [--host ...] [--port ...]
                    [--db PATH|URL]

``--db`` is a SQLite file path (the approval ledger; LangGraph checkpoints go to
the sibling ``<name>.checkpoints<suffix>``) or a ``postgresql://`` URL (ledger and
checkpoints in that database). It is the same value ``aais-langgraph --db``
takes, so a decision made with that CLI reaches the running server, which
resumes the thread; without ``--db`` (before or after the command), ``AAIS_DB``
names it. ``--port 0`` picks a free port; the URL is printed once the server
listens. A port already in use is one line of error (exit status 1), no traceback.

``serve`` needs a login: ``--token-env VAR`` (a bearer token) or, on a laptop
only, ``--local-dev-login`` (every loopback client approves as one local
developer); ``demo`` always uses the latter.

Prometheus metrics are off unless asked for: ``--metrics`` serves ``/metrics`` on the
API port behind the same login, ``--metrics-port PORT`` on a port of their own
without one (bound to ``--metrics-host``, default loopback).

``serve`` accepts for ``pkg.module:attr``: a compiled graph (given the server's
checkpointer when it has none; one compiled with its own keeps it, and the command
says so), a ``StateGraph`` builder (compiled with the server's checkpointer), or a
callable taking ``checkpointer=`` and returning either. The graph is imported before
any file is opened: a mistyped module or attribute is one line (exit status 1).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hashlib
import importlib
import os
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.cli import DB_ENV, add_db_option, chosen_db, escape
from aais_langgraph.ledger import DeliveryPlan, Ledger, is_postgres_url, open_ledger
from aais_langgraph.threads import areconcile_checkpoints

from .ledger_upkeep import upkeep_banner

if TYPE_CHECKING:
    from aais_langgraph.webhooks import SlackApp, WebhookSubscription

    from .service import ServiceSettings

__all__ = ["compiled_graph", "import_graph", "load_graph", "main", "service_settings"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def checkpoints_path(db: str) -> Path:
    """The SQLite file holding LangGraph checkpoints next to the ledger file ``db``."""
    path = Path(db)
    return path.with_name(f"{path.stem}.checkpoints{path.suffix or '.db'}")


@asynccontextmanager
async def open_storage(
    db: str, *, delivery_plan: DeliveryPlan | None = None
) -> AsyncIterator[tuple[Ledger, Any]]:
    """The approval ledger (recording ``delivery_plan``'s webhook deliveries with its
    writes) and an async LangGraph checkpointer for ``--db``."""
    if is_postgres_url(db):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        with open_ledger(db, delivery_plan=delivery_plan) as ledger:
            async with AsyncPostgresSaver.from_conn_string(db) as saver:
                await saver.setup()
                yield ledger, saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    Path(db).parent.mkdir(parents=True, exist_ok=True)
    with open_ledger(db, delivery_plan=delivery_plan) as ledger:
        async with AsyncSqliteSaver.from_conn_string(str(checkpoints_path(db))) as saver:
            yield ledger, saver


def load_graph(spec: str, checkpointer: Any) -> Any:
    """Import ``pkg.module:attr`` and make a compiled graph of it (see the module doc)."""
    return compiled_graph(import_graph(spec), checkpointer, spec)


def import_graph(spec: str) -> Any:
    """The object ``pkg.module:attr`` names, imported from the working directory or
    ``sys.path``; a malformed spec, a module that is not there or fails to import, and a
    missing attribute are each one line (``SystemExit``), never a traceback."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise SystemExit(f"aais-agui: expected module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as missing:
        if missing.name is not None and f"{module_name}.".startswith(f"{missing.name}."):
            raise SystemExit(
                f"aais-agui: no module named {missing.name!r} in {os.getcwd()} or on "
                "sys.path; check the spelling, or run from the directory that holds it"
            ) from None
        raise SystemExit(f"aais-agui: importing {module_name!r} failed: {missing}") from None
    except ImportError as failed:
        raise SystemExit(f"aais-agui: importing {module_name!r} failed: {failed}") from None
    path = module_name
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise SystemExit(f"aais-agui: {path!r} has no attribute {part!r}")
        target = getattr(target, part)
        path = f"{path}.{part}"
    return target


def compiled_graph(target: Any, checkpointer: Any, spec: str) -> Any:
    """``target`` (a compiled graph, a ``StateGraph``, or a factory taking
    ``checkpointer=``) as a compiled graph whose checkpoints go to ``checkpointer``,
    unless it was compiled with a checkpointer of its own (said in one line)."""
    from langgraph.pregel import Pregel

    from .served_graph import refuse_sync_checkpointer

    for _ in range(2):
        if isinstance(target, Pregel):
            own = target.checkpointer
            if own is None or isinstance(own, bool):
                return target.copy(update={"checkpointer": checkpointer})
            if own is not checkpointer:
                try:
                    refuse_sync_checkpointer(own, "graph.checkpointer")
                except TypeError as error:
                    raise SystemExit(f"aais-agui: {spec}: {error}") from None
                print(
                    f"aais-agui: {spec} has its own checkpointer ({type(own).__name__}); "
                    "its checkpoints stay there and --db holds only the ledger"
                )
            return target
        if callable(getattr(target, "compile", None)):
            return target.compile(checkpointer=checkpointer)
        if callable(target):
            target = target(checkpointer=checkpointer)
    raise SystemExit(
        f"aais-agui: {spec} is not a compiled graph, a StateGraph, or a factory of one"
    )


def _authenticator(args: argparse.Namespace) -> Any:
    from .http.security import bearer_token_authenticator, local_development_authenticator

    if getattr(args, "jwt_issuer", None):
        return _jwt_authenticator(args)
    token_env = args.token_env
    if token_env is None:
        return local_development_authenticator()
    token = os.environ.get(token_env)
    if not token:
        raise SystemExit(f"aais-agui: --token-env {token_env}: the variable is empty or unset")
    # One shared token, one identity: for a single trusted client (a backend), not a team.
    actor = {"id": "api-client", "type": "human", "authenticated_by": "bearer token"}
    return bearer_token_authenticator({token: actor})


def _jwt_authenticator(args: argparse.Namespace) -> Any:
    from .http.jwt_tokens import JwtSettings, jwt_authenticator

    secret = None
    if args.jwt_secret_env:
        secret = os.environ.get(args.jwt_secret_env)
        if not secret:
            raise SystemExit(
                f"aais-agui: --jwt-secret-env {args.jwt_secret_env}: the variable is empty or unset"
            )
    try:
        settings = JwtSettings(
            issuer=args.jwt_issuer,
            audience=args.jwt_audience or "",
            jwks_url=args.jwt_jwks_url,
            jwks_file=args.jwt_jwks_file,
            secret=secret,
            groups_claim=args.jwt_groups_claim,
        )
        return jwt_authenticator(settings)
    except (ValueError, OSError) as error:
        text = str(error)
        if text.startswith("secret:"):  # the HMAC secret is too short (RFC 7518 §3.2)
            option = f"--jwt-secret-env {args.jwt_secret_env}"
            detail = text.removeprefix("secret:").strip()
            raise SystemExit(f"aais-agui: {option}: {detail}") from None
        raise SystemExit(f"aais-agui: --jwt-*: {text}") from None


# What only decides access in an access-policy file: with --cedar-policies as well, Cedar
# decides access and these would be silently ignored, so they are refused.
_ACCESS_ONLY_SETTINGS = (
    "administrators",
    "administrator_groups",
    "viewer_groups",
    "default_approvers",
    "separation_of_duties",
    "grants",
    "reconcile",
    "threads",
    "services",
)


def _authorizer(args: argparse.Namespace) -> Any:
    """The authorizer ``serve`` was given: the Cedar policies when given (an access policy
    beside them then gives only its webhooks, Slack channels and follow-ups), else the
    access policy (TOML), else None."""
    policy_file = getattr(args, "access_policy", None)
    cedar = getattr(args, "cedar_policies", None)
    try:
        if cedar:
            from aais_langgraph.authority import CedarAuthorizer

            if policy_file:
                _check_beside_cedar(policy_file)
            return CedarAuthorizer(path=cedar)
        if policy_file:
            from aais_langgraph.authority import load_access_policy

            return load_access_policy(policy_file)
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None
    return None


def _check_beside_cedar(path: str) -> None:
    """ValueError naming the first setting of the access-policy file at ``path`` that
    decides access, which Cedar decides when both are given (its rules' ``quorum`` and
    the requesters' ``view_own``/``cancel_own`` included)."""
    from aais_langgraph.authority import load_access_policy, read_policy_file

    load_access_policy(path)  # the file is valid on its own first
    document = read_policy_file(path)
    where = "--access-policy beside --cedar-policies"
    for key in _ACCESS_ONLY_SETTINGS:
        if key in document:
            raise ValueError(f"{where}: {key}: Cedar decides access; remove it")
    requesters = document.get("requesters", {})
    for key in ("view_own", "cancel_own"):
        if key in requesters:
            raise ValueError(f"{where}: requesters.{key}: Cedar decides access; remove it")
    for index, rule in enumerate(document.get("approvers", [])):
        if "quorum" in rule:
            raise ValueError(f"{where}: approvers[{index}].quorum: Cedar decides access; remove it")


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/"


class _EndStreamsOnShutdown:
    """ASGI middleware: once the server shuts down, open GET streams (the AAIS event
    stream) see their client as gone and end, instead of being cut off with an error."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.closing = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return

        async def receive_until_closing() -> Any:
            message = asyncio.ensure_future(receive())
            closing = asyncio.ensure_future(self.closing.wait())
            await asyncio.wait({message, closing}, return_when=asyncio.FIRST_COMPLETED)
            if message.done():
                closing.cancel()
                return message.result()
            message.cancel()
            return {"type": "http.disconnect"}

        state = {"started": False, "complete": False}

        async def send_tracked(message: Any) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["complete"] = True
            await send(message)

        await self.app(scope, receive_until_closing, send_tracked)
        if state["started"] and not state["complete"]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class AddressInUse(Exception):
    """The port cannot be bound; the message is the one line the command prints."""


def bind_listener(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything else starts so a busy port is one clear
    line (``AddressInUse``) instead of uvicorn's logged traceback and a half-open ledger."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as error:
        sock.close()
        where = f"port {port} on {host}"
        if error.errno == errno.EADDRINUSE:
            raise AddressInUse(
                f"{where} is already in use; choose another with --port (0 picks a free one)"
            ) from None
        raise AddressInUse(
            f"cannot listen on {where} ({error.strerror}); choose another with --host/--port"
        ) from None
    sock.set_inheritable(True)
    return sock


async def _serve(app: Any, sock: socket.socket, host: str, banner: list[str]) -> None:
    """Run uvicorn on the bound ``sock``; print the URL (and ``banner``) once it listens."""
    import uvicorn

    streams = _EndStreamsOnShutdown(app)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            streams.closing.set()
            await super().shutdown(sockets=sockets)

    config = uvicorn.Config(streams, log_level="warning", timeout_graceful_shutdown=5)
    server = Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.05)
    if server.started:
        bound = server.servers[0].sockets[0].getsockname()[1]
        print(f"aais-agui: serving on {_url(host, bound)}", flush=True)
        for line in banner:
            print(f"  {line}", flush=True)
    await serving


async def _run(
    args: argparse.Namespace, sock: socket.socket, authenticate: Any, authorizer: Any
) -> None:
    from aais_langgraph.gate import LedgerMismatchError

    from .http.app import create_app
    from .service import ApprovalService

    settings = service_settings(args)
    webhooks = _webhooks(args)
    slack = _slack(args)
    plan = _plan(args, slack)
    async with open_storage(args.db, delivery_plan=plan) as (ledger, checkpointer):
        authority = ApprovalAuthority(ledger, authorizer=authorizer)
        banner = [f"approvals  aais-langgraph --db {args.db} pending"]
        if webhooks:
            banner.append(f"webhooks   {len(webhooks)} subscriptions (webhooks list)")
        if getattr(plan, "follows_up", False):
            banner.append(
                "follow-ups reminders, escalations, requester notices (webhooks follow-ups)"
            )
        if slack is not None:
            banner.append(f"slack      {len(slack.channels)} channels, POST /slack/interactions")
        if args.command == "demo":
            from .demo import DemoWorkspace, build_demo_agent

            workspace = DemoWorkspace(args.workspace or _default_workspace(args.db))
            graph = build_demo_agent(workspace, checkpointer=checkpointer)
            banner.append(f"workspace  {workspace.root}")
            name = "aais-demo"
        else:
            graph = compiled_graph(args.target, checkpointer, args.graph)
            name = args.graph.partition(":")[2] or "graph"
        try:
            service = ApprovalService(
                graph, authority, settings=settings, webhooks=webhooks or None, slack=slack
            )
        except LedgerMismatchError as error:
            raise SystemExit(f"aais-agui: {getattr(args, 'graph', name)}: {error}") from None
        # A ledger that lost requests runs are paused on (emptied, replaced) is said out loud.
        for problem in await areconcile_checkpoints(authority, checkpointer):
            banner.append(
                f"INTEGRITY {escape(problem.thread_id)} {escape(problem.request_id)}: "
                f"{problem.reason}"
            )
        if args.host not in LOOPBACK and args.token_env is None and not args.jwt_issuer:
            banner.append("WARNING: the local-development authenticator only answers loopback")
        app = create_app(
            service, authenticate=authenticate, name=name, metrics=_metrics(args, authority, banner)
        )
        banner.extend(upkeep_banner(settings))
        await _serve(app, sock, args.host, banner)


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The service settings ``serve``'s options give (``--no-watch``, retention,
    witnesses); raises ``ValueError`` naming a bad option."""
    from aais_langgraph.ledger import RetentionPolicy

    from .service import ServiceSettings

    days, last = getattr(args, "retention_days", None), getattr(args, "retention_last", None)
    policy = None
    if days is not None or last is not None:
        try:
            policy = RetentionPolicy(keep_days=days, keep_last=last)
        except ValueError:
            raise ValueError("--retention-days, --retention-last: 0 or more") from None
    every = float(getattr(args, "retention_every", 3600.0))
    witness_every = float(getattr(args, "witness_every", 300.0))
    if not (every > 0 and witness_every > 0):
        raise ValueError("--retention-every, --witness-every: must be positive")
    watch = not getattr(args, "no_watch", False)
    return ServiceSettings(
        resume_due_every=ServiceSettings.resume_due_every if watch else None,
        orphans_every=ServiceSettings.orphans_every if watch else None,
        retention=policy,
        retention_every=every,
        witnesses=tuple(getattr(args, "witness", None) or ()),
        witness_every=witness_every,
    )


def _webhooks(args: argparse.Namespace) -> list[WebhookSubscription]:
    """The subscriptions in the access policy's ``[[webhooks]]`` (none without one);
    SystemExit names a bad setting."""
    path = getattr(args, "access_policy", None)
    if path is None:
        return []
    from aais_langgraph.webhooks import load_webhooks

    try:
        return list(load_webhooks(path))
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None


def _plan(args: argparse.Namespace, slack: SlackApp | None) -> Any:
    """What the ledger records with each write: the access policy's subscriptions, its
    Slack channels' and the follow-ups its rules ask for (None without a policy, or one
    that asks for none of them); SystemExit names a bad setting."""
    path = getattr(args, "access_policy", None)
    if path is None:
        return None
    from aais_langgraph.webhooks import load_plan

    try:
        return load_plan(path, channels=slack.subscriptions if slack is not None else ())
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None


def _slack(args: argparse.Namespace) -> SlackApp | None:
    """The access policy's ``[[slack]]`` channels and ``[slack_users]`` (None without
    them); SystemExit names a bad setting."""
    path = getattr(args, "access_policy", None)
    if path is None:
        return None
    from aais_langgraph.webhooks import load_slack

    try:
        return load_slack(path)
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None


def _metrics(args: argparse.Namespace, authority: ApprovalAuthority, banner: list[str]) -> Any:
    """``create_app``'s ``metrics``: on the API port (``--metrics``), else False; with
    ``--metrics-port`` they are served on a port of their own (for the command's life)."""
    if not args.metrics and args.metrics_port is None:
        return False
    from aais_langgraph.observability import ApprovalMetrics

    metrics = ApprovalMetrics(authority)
    if args.metrics_port is None:
        banner.append("metrics    GET /metrics (authenticated like the API)")
        return metrics
    from .http.metrics import serve_metrics

    listener = serve_metrics(metrics, host=args.metrics_host, port=args.metrics_port)
    banner.append(f"metrics    {_url(args.metrics_host, listener.port)}metrics (no login)")
    return False


DEFAULT_DB = {"demo": "aais-demo.db", "serve": "aais-agui.db"}
"""The ledger each command opens when neither ``--db`` nor ``AAIS_DB`` names one."""


def _default_workspace(db: str) -> Path:
    """A stable scratch directory per database, under the system temp directory."""
    key = hashlib.sha256(os.path.abspath(db).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / "aais-demo" / key


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aais-agui",
        description="Serve the demo agent or your own LangGraph graph over AG-UI, with AAIS "
        "approvals and the approval inbox page.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="serve the demo agent and the inbox page")
    serve = commands.add_parser("serve", help="serve your graph: pkg.module:attr")
    serve.add_argument("graph", help="pkg.module:attr (compiled graph, StateGraph, or factory)")
    add_db_option(
        [parser, demo, serve],
        f"SQLite path or postgresql:// URL (default: ${DB_ENV}, else {DEFAULT_DB['demo']} "
        f"for demo, {DEFAULT_DB['serve']} for serve)",
    )
    for sub in (demo, serve):
        sub.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1")
        sub.add_argument("--port", type=int, default=8000, help="default 8000; 0 picks one")
        sub.add_argument(
            "--no-watch",
            action="store_true",
            help="do not resume threads whose approvals another process decided",
        )
        sub.add_argument(
            "--metrics",
            action="store_true",
            help="serve Prometheus metrics at /metrics, authenticated like the API",
        )
        sub.add_argument(
            "--metrics-port",
            type=int,
            metavar="PORT",
            help="serve Prometheus metrics on this port instead, without authentication "
            "(on --metrics-host; 0 picks one)",
        )
        sub.add_argument(
            "--metrics-host", default="127.0.0.1", help="for --metrics-port; default 127.0.0.1"
        )
        _add_upkeep_options(sub)
    demo.add_argument("--workspace", type=Path, help="where the demo's write_file may write")
    demo.set_defaults(
        token_env=None,
        local_dev_login=True,
        jwt_issuer=None,
        access_policy=None,
        cedar_policies=None,
    )
    login = serve.add_mutually_exclusive_group()
    login.add_argument(
        "--token-env",
        metavar="VAR",
        help="one shared token for a single trusted client: 'Authorization: Bearer $VAR' "
        "(every holder is the one identity 'api-client'; use --jwt-issuer for people)",
    )
    login.add_argument(
        "--jwt-issuer",
        metavar="ISS",
        help="per-user JWT bearer tokens from this issuer (with --jwt-audience and a key)",
    )
    jwt_options = serve.add_argument_group("JWT login (with --jwt-issuer)")
    jwt_options.add_argument("--jwt-audience", metavar="AUD", help="the required audience")
    keys = jwt_options.add_mutually_exclusive_group()
    keys.add_argument("--jwt-jwks-url", metavar="URL", help="the issuer's JWKS URL")
    keys.add_argument("--jwt-jwks-file", metavar="PATH", help="a JWKS document on disk")
    keys.add_argument(
        "--jwt-secret-env",
        metavar="VAR",
        help="an HMAC secret in $VAR (at least 32 bytes: RFC 7518 §3.2)",
    )
    jwt_options.add_argument(
        "--jwt-groups-claim", default="groups", metavar="CLAIM", help="default: groups"
    )
    serve.add_argument(
        "--access-policy",
        metavar="TOML",
        help="who may see and decide what, and whom its [[webhooks]] tell "
        "(default: every authenticated user, everything; no webhooks)",
    )
    serve.add_argument(
        "--cedar-policies",
        metavar="FILE",
        help="decide access with Cedar (an --access-policy beside it gives only its "
        "webhooks, Slack channels, reminders, escalations and requester notices)",
    )
    login.add_argument(
        "--local-dev-login",
        action="store_true",
        help="UNSAFE outside a laptop: every loopback client approves as 'local-developer'",
    )
    return parser


def _add_upkeep_options(parser: argparse.ArgumentParser) -> None:
    """The server's retention and witness options."""
    group = parser.add_argument_group("retention and witnesses")
    group.add_argument(
        "--retention-days",
        type=float,
        metavar="N",
        help="compact resolved requests older than N days (pending work always stays)",
    )
    group.add_argument(
        "--retention-last",
        type=int,
        metavar="N",
        help="keep only the N most recently resolved requests (with --retention-days: either)",
    )
    group.add_argument(
        "--retention-every",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="how often retention runs; default 3600",
    )
    group.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="FILE|URL",
        help="publish the audit tip to this JSON-lines file or HTTP URL (repeatable)",
    )
    group.add_argument(
        "--witness-every",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="publish at least this often, moved or not; default 300",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aais-agui`` command."""
    parser = _parser()
    args = parser.parse_args(argv)
    args.db = chosen_db(args, default=DEFAULT_DB[args.command])
    if args.token_env is None and not args.local_dev_login and not args.jwt_issuer:
        parser.error(
            "serve needs a login: --jwt-issuer ISS (people), --token-env VAR (one trusted "
            "client), or on a laptop only --local-dev-login"
        )
    # Before any file is opened: a mistyped graph or a bad option leaves nothing behind.
    try:
        if args.command == "serve":
            args.target = import_graph(args.graph)
        authorizer = _authorizer(args)
        _check_webhooks(args)
    except ImportError as error:
        return _missing_extras(error)
    try:
        sock = bind_listener(args.host, args.port)
    except AddressInUse as error:
        print(f"aais-agui: {error}", file=sys.stderr)
        return 1
    try:
        authenticate = _authenticator(args)  # last: the local-development one prints a warning
    except ImportError as error:
        sock.close()
        return _missing_extras(error)
    except BaseException:
        sock.close()
        raise
    try:
        with sock, suppress(KeyboardInterrupt):
            asyncio.run(_run(args, sock, authenticate, authorizer))
    except ImportError as error:
        return _missing_extras(error)
    return 0


def _check_webhooks(args: argparse.Namespace) -> None:
    """SystemExit naming a bad ``[[webhooks]]`` setting of the access policy (an unset
    ``secret_env``), before the server opens its ledger."""
    path = getattr(args, "access_policy", None)
    if path is None:
        return
    from aais_langgraph.webhooks import load_slack, load_webhooks

    try:
        load_webhooks(path)
        load_slack(path)
    except (ValueError, OSError) as error:
        raise SystemExit(f"aais-agui: {error}") from None


def _missing_extras(error: ImportError) -> int:
    print(
        f"aais-agui: {error}\n(the server needs the extras: "
        "pip install 'aais-langgraph[server,sqlite,langchain]'; add 'postgres' for Postgres)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
