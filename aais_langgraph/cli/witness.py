"""``audit publish --witness`` and ``audit verify --witness``: the tip kept outside the ledger.

``publish`` appends the current tip (sealed with the authority key, if one is set)
to each witness. ``verify --witness`` checks the ledger against the latest
witnessed tip after the usual verification: exit status 3 for a rollback (the
ledger is behind a witnessed tip, e.g. a restored backup), 4 for a fork (the entry at
the witnessed index differs: the chain was rewritten), 1 for a publication that
cannot be checked (no valid seal, or its entry is gone and no witnessed compaction
removed it), 2 for a witness that cannot be read. Every publication the witness
returns is checked, not only the latest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from ..authority import ApprovalAuthority
from ..ledger.witness import WitnessError, check_witness, open_witness, publish_tip

__all__ = ["EXIT_FORK", "EXIT_ROLLBACK", "publish", "verify"]

EXIT_ROLLBACK = 3
EXIT_FORK = 4


def publish(authority: ApprovalAuthority, targets: Sequence[str], stdout: TextIO) -> int:
    """Publish the tip to every witness in ``targets``."""
    if not targets:
        stdout.write("error: audit publish: give --witness FILE|URL\n")
        return 2
    try:
        witnessed = publish_tip(
            authority.ledger, [open_witness(t) for t in targets], key=authority.key
        )
    except (WitnessError, ValueError) as error:
        stdout.write(f"error: {error}\n")
        return 2
    if witnessed is None:
        stdout.write("nothing to publish: the audit chain is empty\n")
        return 0
    sealed = "sealed" if witnessed.mac is not None else "unsealed (no authority key)"
    stdout.write(f"published tip {witnessed.tip} to {len(targets)} witness(es), {sealed}\n")
    return 0


def verify(authority: ApprovalAuthority, targets: Sequence[str], stdout: TextIO) -> int:
    """Check the ledger against each witness's latest tip; the worst status wins."""
    status = 0
    for target in targets:
        try:
            published = open_witness(target).publications()
        except (WitnessError, ValueError) as error:
            stdout.write(f"error: {error}\n")
            status = max(status, 2)
            continue
        if not published:
            stdout.write("witness: nothing published yet\n")
            continue
        check = check_witness(authority.ledger, published, key=authority.key)
        stdout.write(f"witness: {check.message}\n")
        if check.verdict == "rollback":
            status = max(status, EXIT_ROLLBACK)
        elif check.verdict == "fork":
            status = max(status, EXIT_FORK)
        elif not check.ok:
            status = max(status, 1)
    return status
