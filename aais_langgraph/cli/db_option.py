"""The ``--db`` option both commands share: before or after the subcommand, else ``AAIS_DB``."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping

__all__ = ["DB_ENV", "add_db_option", "chosen_db", "command_parsers"]

DB_ENV = "AAIS_DB"
"""Environment variable naming the ledger when ``--db`` is not given."""


def command_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser below it, nested ones included
    (``webhooks list``), so an option added to each may follow any command."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases share a parser
                found.extend(command_parsers(sub))
    return found


def add_db_option(parsers: Iterable[argparse.ArgumentParser], help: str) -> None:
    """Add ``--db`` to the command's parser and to each subcommand's, so it may stand on
    either side of the subcommand. ``SUPPRESS`` keeps a subparser that did not see the
    option from overwriting the value the main parser read."""
    for parser in parsers:
        parser.add_argument("--db", metavar="PATH|URL", default=argparse.SUPPRESS, help=help)


def chosen_db(
    args: argparse.Namespace,
    *,
    default: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """``--db`` if given, else ``$AAIS_DB`` if set and not empty, else ``default``."""
    given: str | None = getattr(args, "db", None)
    if given is not None:
        return given
    from_env = (os.environ if environ is None else environ).get(DB_ENV)
    return from_env or default
