"""A racer for test_race: decides a list of decisions on a shared SQLite ledger file.

Run as a script. Reads one JSON line ``{"db": path, "decisions": [...]}`` from stdin,
prints ``ready``, waits for a ``go`` line (so every racer starts together), decides
each decision through ApprovalAuthority.decide, and prints one JSON line of answers.
"""

from __future__ import annotations

import json
import sys

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger


def main() -> None:
    job = json.loads(sys.stdin.readline())
    with SqliteLedger.from_path(job["db"]) as ledger:
        authority = ApprovalAuthority(ledger)
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no go")
        answers = [authority.decide(body).to_json() for body in job["decisions"]]
    print(json.dumps(answers), flush=True)


if __name__ == "__main__":
    main()
