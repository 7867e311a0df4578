"""Commands as words: the argv a command stands for, and the prefix a session grant may cover.

A grant for ``pytest`` must not cover ``pytest -q; curl ...|sh``: a shell reads
more into text than its first word. So a command is compared as an argv (a
list of words), and only when every shell would split it the same way: a
string command may hold letters, digits, ``_ . / , : = + @ % -``, spaces, tabs
and quotes, and nothing else. Any control operator (``; & | ( )``), newline,
substitution (``$`` and backquotes), redirection (``< >``), escape (``\\``),
glob or expansion (``* ? [ ] { } ~ !``), comment (``#``), non-ASCII or control
character means "not a plain command", and a plain command that ``shlex``
cannot split (an unterminated quote) is not one either. Such a command never
matches a grant; it is asked about every time.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence
from typing import Any

__all__ = ["RUNS_OTHER_PROGRAMS", "command_argv", "prefix_words", "session_prefix"]

_WORD = re.compile(r"[A-Za-z0-9_./,:=+@%-]+", re.ASCII)
_PLAIN_TEXT = re.compile(r"[A-Za-z0-9_./,:=+@%\-'\" \t]*", re.ASCII)
_SUBCOMMAND = re.compile(r"[A-Za-z][A-Za-z0-9_-]*", re.ASCII)

RUNS_OTHER_PROGRAMS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox",
        "env", "sudo", "doas", "su", "runuser", "xargs", "nohup", "nice", "ionice",
        "timeout", "time", "watch", "exec", "eval", "command", "builtin", "ssh",
        "python", "python3", "perl", "ruby", "node", "deno", "bun", "php", "lua",
        "awk", "gawk", "find", "make", "npx", "uvx",
    }
)  # fmt: skip
"""Programs whose arguments name other programs or code (a non-exhaustive list): a
session choice is never derived for them, since it would cover anything."""


def command_argv(command: Any) -> tuple[str, ...] | None:
    """The words of a plain command (a string, or a list of words), or None.

    A string is split with ``shlex`` after the character check above. A list is
    taken as argv; each item must be a non-empty word of the same safe characters
    (no spaces or quotes), so joining it for a shell cannot change its meaning.
    """
    if isinstance(command, str):
        if _PLAIN_TEXT.fullmatch(command) is None:
            return None
        try:
            words = shlex.split(command, comments=False, posix=True)
        except ValueError:  # an unterminated quote
            return None
    elif isinstance(command, Sequence) and not isinstance(command, (bytes, bytearray)):
        words = list(command)
        if not all(isinstance(word, str) and _WORD.fullmatch(word) for word in words):
            return None
    else:
        return None
    return tuple(words) if words else None


def prefix_words(prefix: Any) -> tuple[str, ...] | None:
    """The words of a ``command_prefix`` (a string or a list), or None if malformed.

    Every word must be a non-empty plain word: a prefix is a program and its
    leading arguments, never shell text.
    """
    words = command_argv(prefix)
    if words is None or not all(_WORD.fullmatch(word) for word in words):
        return None
    return words


def session_prefix(command: Any) -> list[str] | None:
    """The words a session choice for ``command`` should cover, or None to offer none.

    The program, plus its subcommand when the second word is one (a bare word,
    not an option or a path): ``git status -s`` -> ``["git", "status"]``,
    ``ls -la`` -> ``["ls"]``. None for a command that is not plain, for an
    environment assignment, and for :data:`RUNS_OTHER_PROGRAMS`.
    """
    words = command_argv(command)
    if words is None or _WORD.fullmatch(words[0]) is None or "=" in words[0]:
        return None
    program = words[0]
    name = posixpath.basename(program).rstrip("0123456789.")  # python3.12 -> python
    if name in RUNS_OTHER_PROGRAMS or program.startswith("-"):
        return None
    prefix = [program]
    if len(words) > 1 and _SUBCOMMAND.fullmatch(words[1]):
        prefix.append(words[1])
    return prefix
