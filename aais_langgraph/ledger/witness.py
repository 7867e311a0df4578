"""Witnesses of the audit tip: published copies of ``N:sha256:…`` that detect a rollback or a fork.

Someone who can write the ledger can restore an older backup (a *rollback*: the
chain ends before a tip that was already published) or rewrite the chain and its
tip (a *fork*: the entry at a published index has another hash). Neither shows in
the ledger alone. So the authority publishes its tip to witnesses it does not
control — an append-only JSON-lines file (:class:`FileWitness`) or an HTTP endpoint
(:class:`HttpWitness`, one POST per publication; a GET returns the latest, or all of
them as JSON lines) — sealed with the authority key when one is configured.

Retention removes old entries, so a witnessed entry can leave the chain legitimately;
the witness then also records the compaction (:func:`publish_compaction`): the
checkpoint entry, the floor of the chain left and the hash it chains from.
:func:`check_witness` requires the chain to contain every witnessed entry unchanged,
or a witnessed compaction of it; a checkpoint nobody witnessed covers nothing, so a
rewritten chain behind a forged checkpoint is caught.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from aais_langgraph.protocol import canonical_json, format_timestamp, utc_now

from .base import Ledger
from .integrity import MAC_PREFIX
from .records import JsonDict
from .retention import CompactionReport

__all__ = [
    "FileWitness",
    "HttpWitness",
    "Witness",
    "WitnessCheck",
    "WitnessError",
    "WitnessedTip",
    "check_witness",
    "check_witnessed",
    "open_witness",
    "publish_compaction",
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
    floor: int | None = None
    """For a compaction: the first index of the chain left (entries below it were removed)."""
    chained_from: str | None = None
    """For a compaction: the hash of entry ``floor - 1``, which the chain left links to."""

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
        if self.floor is not None:
            document["compaction"] = {"floor": self.floor, "chained_from": self.chained_from}
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
        compaction = document.get("compaction")
        if compaction is None:
            return cls(index, entry_hash, published_at, mac)
        if not isinstance(compaction, dict):
            raise WitnessError("witness: compaction is not a JSON object")
        floor, chained_from = compaction.get("floor"), compaction.get("chained_from")
        if isinstance(floor, bool) or not isinstance(floor, int) or not 0 < floor <= index:
            raise WitnessError("witness: compaction.floor is not an index at or before the tip")
        if not isinstance(chained_from, str) or not chained_from.startswith("sha256:"):
            raise WitnessError("witness: compaction.chained_from is not a sha256: digest")
        return cls(index, entry_hash, published_at, mac, floor, chained_from)


def tip_seal(
    key: bytes,
    index: int,
    entry_hash: str,
    published_at: str,
    compaction: tuple[int, str] | None = None,
) -> str:
    """The authority's HMAC-SHA256 seal of a publication (and of the compaction it
    records: ``(floor, chained_from)``).

    Args:
        key: the authority key.
        index: the witnessed entry's index.
        entry_hash: its hash.
        published_at: when it was published.
        compaction: for a compaction, the floor of the chain left and the hash it
            chains from.
    """
    row: JsonDict = {"index": index, "hash": entry_hash, "published_at": published_at}
    if compaction is not None:
        row["compaction"] = {"floor": compaction[0], "chained_from": compaction[1]}
    message = canonical_json({"aais-langgraph-seal": "witness", "row": row}, pointer="/seal")
    return MAC_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()


class Witness(Protocol):
    """Somewhere the tip is published and read back from."""

    def publish(self, witnessed: WitnessedTip) -> None:
        """Record one publication (append-only)."""

    def latest(self) -> WitnessedTip | None:
        """The newest publication (None: nothing published yet)."""

    def publications(self) -> list[WitnessedTip]:
        """Every publication the witness returns, oldest first."""


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

    def publications(self) -> list[WitnessedTip]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as error:
            raise WitnessError(f"witness file: cannot read ({type(error).__name__})") from None
        return _publications(text, "witness file: a line is not JSON")

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
        published = _publications(text, _NOT_JSON)
        return published[-1] if published else None

    def publications(self) -> list[WitnessedTip]:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return []
            raise WitnessError(f"witness URL: reading failed (HTTP {error.code})") from None
        except (urllib.error.URLError, OSError, UnicodeDecodeError) as error:
            raise WitnessError(f"witness URL: reading failed ({type(error).__name__})") from None
        return _publications(text, _NOT_JSON)


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
    return _publish(WitnessedTip(tip[0], tip[1], ""), witnesses, key)


def publish_compaction(
    report: CompactionReport, witnesses: Iterable[Witness], *, key: bytes | None = None
) -> WitnessedTip | None:
    """Publish a retention pass's checkpoint entry with the floor of the chain it left and
    the hash it chains from, so a witnessed entry it removed stays accounted for; None
    when the pass removed nothing."""
    if report.checkpoint is None or report.compacted_through is None:
        return None
    index, entry_hash = report.checkpoint
    floor = report.compacted_through + 1
    return _publish(
        WitnessedTip(index, entry_hash, "", None, floor, report.chained_from), witnesses, key
    )


def _publish(draft: WitnessedTip, witnesses: Iterable[Witness], key: bytes | None) -> WitnessedTip:
    published_at = format_timestamp(utc_now())
    compaction = None
    if draft.floor is not None and draft.chained_from is not None:
        compaction = (draft.floor, draft.chained_from)
    mac = None
    if key is not None:
        mac = tip_seal(key, draft.index, draft.entry_hash, published_at, compaction)
    witnessed = replace(draft, published_at=published_at, mac=mac)
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
    """Compare the ledger with one publication (:func:`check_witness` with it alone): a
    *rollback* when the chain ends before the witnessed index, a *fork* when the entry
    there has another hash, ``unsealed`` when ``key`` is given and its seal does not
    verify, ``compacted`` when the entry is not in the chain (no witnessed compaction
    accounts for it)."""
    return check_witness(ledger, [witnessed], key=key)


def _compaction_of(witnessed: WitnessedTip) -> tuple[int, str] | None:
    if witnessed.floor is None or witnessed.chained_from is None:
        return None
    return witnessed.floor, witnessed.chained_from


def check_witness(
    ledger: Ledger, publications: Sequence[WitnessedTip], *, key: bytes | None = None
) -> WitnessCheck:
    """Compare the ledger with every publication of a witness (oldest first): each
    witnessed entry must be in the chain unchanged, or removed by a witnessed compaction
    published after it (one whose floor is past it, itself accounted for the same way;
    the entry just below the floor must have the hash the compaction chains from). The
    first publication that fails decides the verdict (newest first); ``ok`` when all
    pass, or when nothing was published."""
    if not publications:
        raise WitnessError("witness: nothing published yet")
    tip = ledger.audit_tip()
    last = -1 if tip is None else tip[0]
    covering: list[WitnessedTip] = []
    for witnessed in reversed(publications):
        if key is not None:
            expected = tip_seal(
                key,
                witnessed.index,
                witnessed.entry_hash,
                witnessed.published_at,
                _compaction_of(witnessed),
            )
            if witnessed.mac is None or not hmac.compare_digest(expected, witnessed.mac):
                return WitnessCheck(
                    "unsealed",
                    f"the witnessed tip {witnessed.index} carries no valid seal of the "
                    "authority key",
                    witnessed,
                )
        if witnessed.index > last:
            return _rollback(last, witnessed)
        found = ledger.audit_entries(after_index=witnessed.index - 1, limit=1)
        if found and found[0].index == witnessed.index:
            if found[0].entry_hash != witnessed.entry_hash:
                return _fork(witnessed)
        else:
            cover = next((c for c in covering if (c.floor or 0) > witnessed.index), None)
            if cover is None:
                return WitnessCheck(
                    "compacted",
                    f"entry {witnessed.index} is not in the chain and no witnessed compaction "
                    "removed it: the history was compacted without publishing it, or rewritten",
                    witnessed,
                )
            if cover.floor == witnessed.index + 1 and cover.chained_from != witnessed.entry_hash:
                return _fork(witnessed)
        if _compaction_of(witnessed) is not None:
            covering.append(witnessed)
    newest = publications[-1]
    return WitnessCheck(
        "ok",
        f"witnessed tip {newest.index} is in the chain, unchanged, and every earlier "
        f"publication ({len(publications)} in all) is in it or was compacted as witnessed",
        newest,
    )


def _rollback(last: int, witnessed: WitnessedTip) -> WitnessCheck:
    return WitnessCheck(
        "rollback",
        f"ROLLBACK: the ledger ends at entry {last}, but entry {witnessed.index} was "
        f"witnessed at {witnessed.published_at}: it was restored from an older state",
        witnessed,
    )


def _fork(witnessed: WitnessedTip) -> WitnessCheck:
    return WitnessCheck(
        "fork",
        f"FORK: entry {witnessed.index} differs from the one witnessed at "
        f"{witnessed.published_at}: the chain was rewritten",
        witnessed,
    )


_NOT_JSON = "witness URL: the response is not JSON"


def _publications(text: str, not_json: str) -> list[WitnessedTip]:
    """The publications of a JSON-lines text (``not_json``: the error when a line is not)."""
    try:
        return [
            WitnessedTip.from_json(json.loads(line)) for line in text.splitlines() if line.strip()
        ]
    except json.JSONDecodeError:
        raise WitnessError(not_json) from None
