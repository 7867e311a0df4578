"""Text from a request made safe where it reaches people: mail headers and Slack messages.

A request's summary, action name and kind, resource and the like are usually built
from model output or tool arguments, so every notice treats them as hostile. This
module is the one place that makes them safe; the mail message (:mod:`.mail`), the
Slack webhook body (:mod:`.formats`) and the Slack app's messages
(:mod:`.slack_messages`) take request text through it and nowhere else:

- :func:`one_line`: every character :meth:`str.splitlines` breaks a line at (CR, LF,
  VT, FF, the file, group and record separators, NEL, U+2028, U+2029) and every other
  control character becomes a space, so no text can start a line of its own (a mail
  header or body line, a Slack line that looks like the app's own);
- :func:`header_text`: one line, and no RFC 2047 encoded word: ``=?`` is written
  ``= ?``. The standard library's :mod:`email` decodes encoded words when it parses a
  header value, and some patch levels of the Pythons this project supports then write
  the decoded text (CR/LF included) unencoded while folding, so a summary holding
  ``=?utf-8?q?x=0D=0ABcc:...?=`` would become a ``Bcc:`` header line;
- :func:`json_lines`: a value as indented JSON whose only line breaks are its own (a
  line separator inside a string is written as a ``\\u`` escape, the same JSON);
- :func:`escape_mrkdwn`: one line, with ``&``, ``<`` and ``>`` escaped as Slack asks
  (no mention, link or date markup of the request's own).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["escape_mrkdwn", "header_text", "json_lines", "one_line"]

_BREAKING = frozenset({"Cc", "Zl", "Zp"})
"""Unicode categories turned into spaces: the control characters (every line break
:meth:`str.splitlines` knows but two is one) and the line and paragraph separators."""


def one_line(text: str) -> str:
    """``text`` on one line: its control characters and line separators shown as spaces."""
    if text.isprintable():  # the common case: nothing to change
        return text
    return "".join(" " if unicodedata.category(char) in _BREAKING else char for char in text)


def header_text(text: str) -> str:
    """``text`` safe as (part of) a mail header value: one line, no encoded word."""
    return one_line(text).replace("=?", "= ?")


def json_lines(value: Any) -> str:
    """``value`` as JSON indented by two, its keys sorted: a line per member, and no
    line break of a string's own (written escaped, so the JSON means the same)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2)
    return "".join(
        f"\\u{ord(char):04x}" if char != "\n" and unicodedata.category(char) in _BREAKING else char
        for char in text
    )


def escape_mrkdwn(text: str) -> str:
    """``text`` safe in Slack mrkdwn: on one line, and ``&``, ``<``, ``>`` escaped as
    Slack asks."""
    return one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
