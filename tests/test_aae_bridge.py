"""The AAE bridge suite (tests/aae_bridge) passes against the real ``aae-protocol``.

``aae-protocol`` 0.9 pins ``cryptography<46`` and the dev extra's ``langgraph-api``
needs ``>=50``, so the SDK cannot live in this environment: ``scripts/install.sh``
builds a second one, ``.venv-aae``, and this test runs the suite there, so that
``python -m pytest`` covers the bridge too.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("AAIS_AAE_VENV", ROOT / ".venv-aae"))
PYTHON = VENV / "bin" / "python"
MISSING = (
    f"the AAE bridge environment is missing ({PYTHON}): run `bash scripts/install.sh` "
    "(it builds .venv-aae with aae-protocol; Python >= 3.11), or point AAIS_AAE_VENV at one"
)


@pytest.mark.timeout(1800)
def test_the_aae_bridge_suite_passes_in_its_own_environment() -> None:
    if not PYTHON.exists():
        pytest.fail(MISSING, pytrace=False)
    env = {
        **os.environ,
        # this checkout's code, whichever checkout the environment was built from
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]),
    }
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        [str(PYTHON), "-m", "pytest", "tests/aae_bridge", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1700,
    )
    report = result.stdout[-6000:] + result.stderr[-3000:]
    assert result.returncode == 0, report
    summary = result.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary), report
    assert not re.search(r"\b(skipped|xfailed|xpassed|deselected|failed|error)", summary), report
