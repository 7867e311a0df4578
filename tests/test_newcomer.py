"""A newcomer's path from a clone to a first approval, as a fresh user takes it: a new
virtualenv, the README's install command, then the README's quickstart run by that
virtualenv's Python (nothing from the test environment is importable there)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from test_readme import README, ROOT, _blocks, _quickstart, _section

USER_INSTALL = 'pip install ".[sqlite,server,langchain]"'


def test_the_readmes_first_command_is_the_user_install_from_a_clone() -> None:
    assert _blocks(_section("Install"), "bash")[0].strip() == USER_INSTALL


def test_a_fresh_virtualenv_goes_from_the_readmes_install_to_a_first_approval(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["PATH"] = f"{venv / 'bin'}{os.pathsep}{environ.get('PATH', '')}"
    [program, *arguments] = shlex.split(_blocks(_section("Install"), "bash")[0])
    assert program == "pip"
    installed = subprocess.run(
        [str(python), "-m", "pip", "--quiet", *arguments],
        cwd=ROOT,  # the clone, where the README's command is typed
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    script = tmp_path / "quickstart.py"
    script.write_text(_quickstart() + "\nprint('first approval:', resolution.approved)\n")
    ran = subprocess.run(
        [str(python), str(script)],
        cwd=tmp_path,  # not the clone: the installed package, not the source tree
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.strip().splitlines()[-1] == "first approval: True"
    located = subprocess.run(
        [str(python), "-c", "import aais_langgraph; print(aais_langgraph.__file__)"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert str(venv) in located.stdout, "the quickstart ran against another copy"
    print(f"{README.name}: clone to first approval in {time.monotonic() - started:.0f} s")
