"""Witnesses of the audit tip: published copies of ``N:sha256:…`` that detect a rollback or a fork.

Someone who can write the ledger can restore an older backup (a *rollback*: the
chain ends before a tip that was already published) or rewrite the chain and its
tip (a *fork*: the entry at a published index has another hash). Neither shows in
the ledger alone. So the authority publishes its tip to witnesses it does not
control — an append-only JSON-lines file (:class:`FileWitness`) or an HTTP endpoint
(:class:`HttpWitness`, one POST per publication; a GET returns the latest) — sealed
with the authority key when one is configured, and :func:`check_witnessed` compares
the ledger with the latest witnessed tip.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from aais_langgraph.protocol import canonical_json, format_timestamp, utc_now

from .base import JsonDict, Ledger
from .integrity import MAC_PREFIX

__all__ = [
    "FileWitness",
    "HttpWitness",
    "Witness",
    "WitnessCheck",
    "WitnessError",
    "WitnessedTip",
    "check_witnessed",
    "open_witness",
    "publish_tip",
]

_TIMEOUT = 10.0
_TAIL_BYTES = 65536


class WitnessError(RuntimeError):
    """A witness could not be read or written, or holds nothing readable."""


@dataclass(frozen=True)
class WitnessedTip:
    """One publication: the tip ``(index, entry_hash)``, when, and its seal (None: no key)."""

    index: int
    entry_hash: str
    published_at: str
    mac: str | None = None

    @property
    def tip(self) -> str:
        """``N:sha256:…``, as ``audit verify`` prints it."""
        return f"{self.index}:{self.entry_hash}"

    def to_json(self) -> JsonDict:
        """The publication as one JSON object."""
        document: JsonDict = {
            "tip": self.tip,
            "index": self.index,
            "hash": self.entry_hash,
            "published_at": self.published_at,
        }
        if self.mac is not None:
            document["mac"] = self.mac
        return document

    @classmethod
    def from_json(cls, document: Any) -> WitnessedTip:
        """A publication read back; raises :class:`WitnessError` naming the bad field."""
        if not isinstance(document, dict):
            raise WitnessError("witness: a publication is not a JSON object")
        index, entry_hash = document.get("index"), document.get("hash")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise WitnessError("witness: index is not a non-negative integer")
        if not isinstance(entry_hash, str) or not entry_hash.startswith("sha256:"):
            raise WitnessError("witness: hash is not a sha256: digest")
        published_at = document.get("published_at")
        if not isinstance(published_at, str):
            raise WitnessError("witness: published_at is missing")
        mac = document.get("mac")
        if mac is not None and not isinstance(mac, str):
            raise WitnessError("witness: mac is not text")
        return cls(index, entry_hash, published_at, mac)


def tip_seal(key: bytes, index: int, entry_hash: str, published_at: str) -> str:
    """The authority's HMAC-SHA256 seal of a publication."""
    row = {"index": index, "hash": entry_hash, "published_at": published_at}
    message = canonical_json({"aais-langgraph-seal": "witness", "row": row}, pointer="/seal")
    return MAC_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()


class Witness(Protocol):
    """Somewhere the tip is published and read back from."""

    def publish(self, witnessed: WitnessedTip) -> None:
        """Record one publication (append-only)."""

    def latest(self) -> WitnessedTip | None:
        """The newest publication (None: nothing published yet)."""


class FileWitness:
    """An append-only JSON-lines file: one publication a line, flushed to disk."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def publish(self, witnessed: WitnessedTip) -> None:
        line = json.dumps(witnessed.to_json(), sort_keys=True) + "\n"
        try:
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line)
                file.flush()
                os.fsync(file.fileno())
        except OSError as error:
            raise WitnessError(f"witness file: cannot append ({error.strerror})") from None

    def latest(self) -> WitnessedTip | None:
        try:
            with self.path.open("rb") as file:  # the last line is in the file's tail
                file.seek(0, os.SEEK_END)
                file.seek(max(file.tell() - _TAIL_BYTES, 0))
                lines = file.read().decode("utf-8", "replace").splitlines()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise WitnessError(f"witness file: cannot read ({type(error).__name__})") from None
        for line in reversed(lines):
            if line.strip():
                try:
                    return WitnessedTip.from_json(json.loads(line))
                except json.JSONDecodeError:
                    raise WitnessError("witness file: its last line is not JSON") from None
        return None


class HttpWitness:
    """An HTTP witness: each publication is POSTed as JSON; a GET returns the latest
    (one JSON object, or JSON lines whose last one is the latest; 404 or an empty body:
    nothing published)."""

    def __init__(self, url: str, *, timeout: float = _TIMEOUT) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError("witness: an HTTP witness needs an http:// or https:// URL")
        self.url = url
        self.timeout = timeout

    def publish(self, witnessed: WitnessedTip) -> None:
        body = json.dumps(witnessed.to_json(), sort_keys=True).encode("utf-8")
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as error:
            raise WitnessError(f"witness URL: publishing failed ({type(error).__name__})") from None

    def latest(self) -> WitnessedTip | None:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise WitnessError(f"witness URL: reading failed (HTTP {error.code})") from None
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as error:
            raise WitnessError(f"witness URL: reading failed ({type(error).__name__})") from None
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            return None
        try:
            return WitnessedTip.from_json(json.loads(lines[-1]))
        except json.JSONDecodeError:
            raise WitnessError("witness URL: the response is not JSON") from None


def open_witness(target: str) -> Witness:
    """An :class:`HttpWitness` for an ``http(s)://`` URL, else a :class:`FileWitness`."""
    if target.startswith(("http://", "https://")):
        return HttpWitness(target)
    return FileWitness(target)


def publish_tip(
    ledger: Ledger, witnesses: Iterable[Witness], *, key: bytes | None = None
) -> WitnessedTip | None:
    """Publish the ledger's current tip to every witness (sealed with ``key``); None
    when the chain is still empty. Every witness is tried; the first failure is raised
    after the others were written."""
    tip = ledger.audit_tip()
    if tip is None:
        return None
    published_at = format_timestamp(utc_now())
    mac = None if key is None else tip_seal(key, tip[0], tip[1], published_at)
    witnessed = WitnessedTip(tip[0], tip[1], published_at, mac)
    failure: WitnessError | None = None
    for witness in witnesses:
        try:
            witness.publish(witnessed)
        except WitnessError as error:
            failure = failure or error
    if failure is not None:
        raise failure
    return witnessed


Verdict = Literal["ok", "rollback", "fork", "unsealed", "compacted"]


@dataclass(frozen=True)
class WitnessCheck:
    """How the ledger compares with a witnessed tip; ``message`` holds no stored value."""

    verdict: Verdict
    message: str
    witnessed: WitnessedTip

    @property
    def ok(self) -> bool:
        """True when the ledger contains the witnessed entry, unchanged."""
        return self.verdict == "ok"


def check_witnessed(
    ledger: Ledger, witnessed: WitnessedTip, *, key: bytes | None = None
) -> WitnessCheck:
    """Compare the ledger with ``witnessed``: a *rollback* when the chain ends before the
    witnessed index, a *fork* when the entry there has another hash. With ``key``, a
    publication whose seal does not verify is refused (``unsealed``): anyone could have
    written it. A witnessed entry that retention removed is checked against the
    checkpoint's hash when it is the removed range's last entry, else ``compacted``."""
    if key is not None:
        expected = tip_seal(key, witnessed.index, witnessed.entry_hash, witnessed.published_at)
        if witnessed.mac is None or not hmac.compare_digest(expected, witnessed.mac):
            return WitnessCheck(
                "unsealed",
                f"the witnessed tip {witnessed.index} carries no valid seal of the authority key",
                witnessed,
            )
    tip = ledger.audit_tip()
    last = -1 if tip is None else tip[0]
    if witnessed.index > last:
        return WitnessCheck(
            "rollback",
            f"ROLLBACK: the ledger ends at entry {last}, but entry {witnessed.index} was "
            f"witnessed at {witnessed.published_at}: it was restored from an older state",
            witnessed,
        )
    found = ledger.audit_entries(after_index=witnessed.index - 1, limit=1)
    entry_hash: str | None = None
    if found and found[0].index == witnessed.index:
        entry_hash = found[0].entry_hash
    else:
        entry_hash = _checkpoint_hash(ledger.audit_entries(limit=None), witnessed.index)
        if entry_hash is None:
            return WitnessCheck(
                "compacted",
                f"entry {witnessed.index} was compacted away: publish a newer tip to check",
                witnessed,
            )
    if entry_hash != witnessed.entry_hash:
        return WitnessCheck(
            "fork",
            f"FORK: entry {witnessed.index} differs from the one witnessed at "
            f"{witnessed.published_at}: the chain was rewritten",
            witnessed,
        )
    return WitnessCheck(
        "ok", f"witnessed tip {witnessed.index} is in the chain, unchanged", witnessed
    )


def _checkpoint_hash(entries: Sequence[Any], index: int) -> str | None:
    """The hash a ``compacted`` checkpoint records for the removed entry ``index``."""
    for entry in reversed(entries):
        payload = entry.payload
        if entry.kind == "compacted" and payload.get("audit_through") == index:
            found = payload.get("audit_through_hash")
            return found if isinstance(found, str) else None
    return None
