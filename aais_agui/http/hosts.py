"""``Host`` and ``Origin`` headers parsed by the standard library's URL rules, failing closed.

A value is accepted only when :func:`urllib.parse.urlsplit` reads it as exactly
``host[:port]`` (``scheme://host[:port]`` for an origin) and it round-trips: no
user info, path, query, fragment, percent-escape, zone id, whitespace or
non-ASCII character, an IP literal that :mod:`ipaddress` accepts or a DNS name
of letters, digits, ``-`` and ``_``, and a port of 1-5 ASCII digits. Anything
else is None, so ``[::1].evil.com:8000`` or ``127.0.0.1:8000@evil.com`` is
never mistaken for loopback.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Authority", "is_loopback_name", "parse_host", "parse_origin", "with_default_port"]

_MAX_HOST_LENGTH = 300
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_PORT = re.compile(r"[0-9]{1,5}")
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Authority:
    """A parsed ``host[:port]``: ``host`` is lower-case, IPv6 without brackets."""

    host: str
    port: int | None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _is_dns_name(host: str) -> bool:
    if len(host) > 253:
        return False
    labels = host.split(".")
    # A last label of digits only would make a dotted quad that ipaddress refused.
    return all(_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdecimal()


def parse_host(value: str | None) -> Authority | None:
    """The ``Host`` header as an :class:`Authority`, or None for anything odd."""
    if not value or len(value) > _MAX_HOST_LENGTH or not value.isascii():
        return None
    text = value.lower()
    if any(char in text for char in "@/\\?#% \t\r\n") or not text.isprintable():
        return None
    try:
        parts = urlsplit("//" + text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    address = _ip(host)
    if text.startswith("["):
        if address is None or address.version != 6:
            return None
        shown = f"[{host}]"
    elif address is not None or _is_dns_name(host):
        shown = host
    else:
        return None
    rest = text[len(shown) :]
    if not text.startswith(shown) or (rest and not (rest[0] == ":" and _PORT.fullmatch(rest[1:]))):
        return None  # what urlsplit read is not the whole value (e.g. "[::1].evil.com")
    if rest and (port is None or not 0 < port <= 65535):
        return None
    return Authority(host, port)


def parse_origin(value: str | None) -> tuple[str, Authority] | None:
    """An ``Origin`` header (``scheme://host[:port]``) as (scheme, authority with port), or None.

    The default port of the scheme is filled in, so ``http://a`` equals ``http://a:80``.
    ``null`` and every value with a path, user info or an unknown scheme are None.
    """
    if not value or len(value) > _MAX_HOST_LENGTH + 10 or not value.isascii():
        return None
    scheme, separator, rest = value.partition("://")
    scheme = scheme.lower()
    if not separator or scheme not in _DEFAULT_PORTS:
        return None
    authority = parse_host(rest)
    if authority is None:
        return None
    return scheme, with_default_port(authority, scheme)


def with_default_port(authority: Authority, scheme: str) -> Authority:
    """``authority`` with the scheme's default port when it names none."""
    if authority.port is not None:
        return authority
    return Authority(authority.host, _DEFAULT_PORTS.get(scheme))


def is_loopback_name(authority: Authority | None) -> bool:
    """True for ``localhost`` and loopback IP literals (``127.0.0.0/8``, ``::1``)."""
    if authority is None:
        return False
    if authority.host == "localhost":
        return True
    address = _ip(authority.host)
    return address is not None and address.is_loopback
