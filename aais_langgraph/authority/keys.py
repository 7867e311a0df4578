"""The optional authority key: seals recorded rows so a database writer cannot forge approvals.

The key is held by the processes that record decisions (server, CLI, graphs) and
never stored in the ledger. It comes from ``ApprovalAuthority(..., key=...)``, else
from the environment:

``AAIS_AUTHORITY_KEY_FILE``
    A file whose bytes (a trailing newline dropped) are the key. Preferred: the
    environment of a process is readable by more parties than a 0600 file.
``AAIS_AUTHORITY_KEY``
    The key itself, as text (UTF-8).

Setting both is an error, and so is a key shorter than 32 bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["AUTHORITY_KEY_FILE_VAR", "AUTHORITY_KEY_VAR", "MIN_KEY_BYTES", "load_authority_key"]

AUTHORITY_KEY_VAR = "AAIS_AUTHORITY_KEY"
AUTHORITY_KEY_FILE_VAR = "AAIS_AUTHORITY_KEY_FILE"
MIN_KEY_BYTES = 32


def _checked(key: bytes, source: str) -> bytes:
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{source}: an authority key needs at least {MIN_KEY_BYTES} bytes")
    return key


def load_authority_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key the environment configures, or None when neither variable is set."""
    env = os.environ if environ is None else environ
    text = env.get(AUTHORITY_KEY_VAR, "")
    path = env.get(AUTHORITY_KEY_FILE_VAR, "").strip()
    if text and path:
        raise ValueError(
            f"{AUTHORITY_KEY_VAR}, {AUTHORITY_KEY_FILE_VAR}: set one of them, not both"
        )
    if path:
        try:
            data = Path(path).read_bytes()
        except OSError as error:
            raise ValueError(
                f"{AUTHORITY_KEY_FILE_VAR}: cannot read the key file ({error.strerror})"
            ) from None
        return _checked(data.removesuffix(b"\n").removesuffix(b"\r"), AUTHORITY_KEY_FILE_VAR)
    if text:
        return _checked(text.encode("utf-8"), AUTHORITY_KEY_VAR)
    return None


def resolve_key(key: bytes | str | None) -> bytes | None:
    """``key`` as bytes (text is UTF-8), or the environment's key when ``key`` is None."""
    if key is None:
        return load_authority_key()
    return _checked(key.encode("utf-8") if isinstance(key, str) else bytes(key), "key")
