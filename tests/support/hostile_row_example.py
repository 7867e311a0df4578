"""One row of the hostile-input table, as the environment says (for ``test_gate.py``).

Not collected by the suite (its name is no test file's); ``tests/hostile/test_gate.py`` runs pytest
on it, in a process of its own, to see what exit status a run recording that row has.
"""

from __future__ import annotations

import os

from hostile.report import record


def test_records_the_row_it_is_told() -> None:
    tried, failed_open, server_errors, double_runs = (
        int(count) for count in os.environ["AAIS_GATE_COUNTS"].split(",")
    )
    record(os.environ["AAIS_GATE_CATEGORY"], tried, failed_open, server_errors, double_runs)
