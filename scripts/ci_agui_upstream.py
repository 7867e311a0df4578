"""CI step: ag-ui-langgraph's own test suite, run against AAISLangGraphAgent.

Gets the sdist of the INSTALLED ag-ui-langgraph (``pip download --no-binary :all:``),
unpacks its ``tests/`` (the package directory beside them points at the installed
package, so both runs test the installed code), and runs the suite twice:

1. as shipped, against the stock ``LangGraphAgent``: a test that fails here needs
   something the sdist lacks (a file of upstream's monorepo), so it is no verdict
   on us and is left out;
2. with ``scripts/agui_upstream_plugin.py``, which replaces ``LangGraphAgent`` by a
   subclass of ``AAISLangGraphAgent`` before the tests are collected.

Every test that passes on stock and fails on ours must be listed, with its reason,
in ``tests/agui/upstream_differences.txt`` (``<test id> | <reason>``; ``#`` starts a
comment). The step fails on a failure not listed, and on a listed test that now
passes, fails on stock too or no longer exists, so the list stays honest.

Run from the repository root with the project's environment active::

    python scripts/ci_agui_upstream.py [--keep DIR]

Exit status 0 when ours differs from stock exactly as listed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIFFERENCES = ROOT / "tests" / "agui" / "upstream_differences.txt"
DISTRIBUTION = "ag-ui-langgraph"
PACKAGE = "ag_ui_langgraph"


def documented_differences(path: Path) -> dict[str, str]:
    """Test id -> reason, from ``path`` (``<test id> | <reason>`` per line)."""
    found: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        test_id, separator, reason = (part.strip() for part in text.partition("|"))
        if not separator or not test_id or not reason:
            raise SystemExit(f"{path.name}:{number}: expected '<test id> | <reason>'")
        if test_id in found:
            raise SystemExit(f"{path.name}:{number}: test id listed twice")
        found[test_id] = reason
    return found


def fetch_tests(installed: str, work: Path) -> Path:
    """The sdist's tree with its tests, its package directory linked to the installed one."""
    download = work / "sdist"
    fetched = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-binary",
            ":all:",
            "--no-deps",
            f"{DISTRIBUTION}=={installed}",
            "-d",
            str(download),
        ],
        check=False,
    )
    if fetched.returncode != 0:
        raise SystemExit(f"could not download the {DISTRIBUTION} {installed} sdist (see above)")
    [archive] = download.glob("*.tar.gz")
    with tarfile.open(archive) as sdist:
        if hasattr(tarfile, "data_filter"):
            sdist.extractall(work / "src", filter="data")
        else:  # a Python without extraction filters
            sdist.extractall(work / "src")
    [tree] = (work / "src").iterdir()
    if not (tree / "tests").is_dir():
        raise SystemExit(f"the {DISTRIBUTION} {installed} sdist has no tests/ directory")
    import ag_ui_langgraph

    shipped = tree / PACKAGE
    if shipped.is_dir():
        for path in sorted(shipped.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        shipped.rmdir()
    shipped.symlink_to(Path(ag_ui_langgraph.__file__).resolve().parent, target_is_directory=True)
    # The suite's own pytest settings (the sdist declares none) and asyncio's mode.
    (tree / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n", encoding="utf-8")
    return tree


def run_suite(tree: Path, outcomes: Path, *, ours: bool) -> dict[str, str]:
    """Test id -> outcome of one run of the suite in ``tree``."""
    plugins = ["-p", "agui_upstream_outcomes"]
    if ours:
        plugins += ["-p", "agui_upstream_plugin"]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "scripts"), str(ROOT), os.environ.get("PYTHONPATH", "")]
        ),
        "AAIS_UPSTREAM_OUTCOMES": str(outcomes),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "tests",
        "-q",
        "-p",
        "no:cacheprovider",
        "--import-mode=append",
        "--timeout=120",
        *plugins,
    ]
    completed = subprocess.run(
        command, cwd=tree, env=environment, capture_output=True, text=True, check=False
    )
    if completed.returncode not in (0, 1) or not outcomes.exists():
        sys.stdout.write(completed.stdout[-4000:])
        sys.stderr.write(completed.stderr[-4000:])
        raise SystemExit(f"pytest could not run the suite (exit {completed.returncode})")
    result: dict[str, str] = json.loads(outcomes.read_text(encoding="utf-8"))
    return result


def compare(
    stock: dict[str, str], ours: dict[str, str], listed: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(failures not listed, listed entries that are no difference)."""
    undocumented = sorted(
        test
        for test, outcome in ours.items()
        if outcome == "failed" and stock.get(test) == "passed" and test not in listed
    )
    stale = []
    for test in sorted(listed):
        if test not in ours:
            stale.append(f"{test}: no such test")
        elif ours[test] != "failed":
            stale.append(f"{test}: {ours[test]} against AAISLangGraphAgent")
        elif stock.get(test) != "passed":
            stale.append(f"{test}: not passing on stock either")
    return undocumented, stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it")
    arguments = parser.parse_args()
    started = time.monotonic()
    installed = version(DISTRIBUTION)
    listed = documented_differences(DIFFERENCES)
    with tempfile.TemporaryDirectory(prefix="aais-agui-upstream-") as scratch:
        work = arguments.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        tree = fetch_tests(installed, work)
        stock = run_suite(tree, work / "stock.json", ours=False)
        ours = run_suite(tree, work / "ours.json", ours=True)
    undocumented, stale = compare(stock, ours, listed)
    judged = {test for test, outcome in stock.items() if outcome == "passed"}
    passed = sum(1 for test in judged if ours.get(test) == "passed")
    print(
        f"ag-ui-langgraph {installed}'s tests against AAISLangGraphAgent: {passed} of "
        f"{len(judged)} passed (the tests that pass on stock LangGraphAgent; "
        f"{len(stock) - len(judged)} more do not run from the sdist); "
        f"{len(listed)} documented differences ({DIFFERENCES.relative_to(ROOT)}); "
        f"{time.monotonic() - started:.0f} s"
    )
    if undocumented:
        print("\nFailing against AAISLangGraphAgent and not documented as a difference:")
        print("\n".join(f"  {test}" for test in undocumented))
    if stale:
        print("\nListed as a difference, but no difference (remove or fix the entry):")
        print("\n".join(f"  {entry}" for entry in stale))
    return 1 if undocumented or stale else 0


if __name__ == "__main__":
    sys.exit(main())
