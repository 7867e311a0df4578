"""``aais_agui.mapping`` needs only the core dependencies; the server names say which extra
they need. Run in a fresh interpreter whose import system refuses the server packages."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SERVER_PACKAGES = ("fastapi", "starlette", "uvicorn", "ag_ui_langgraph")

PRELUDE = f"""
import importlib.abc, sys

class RefuseServerPackages(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {SERVER_PACKAGES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, RefuseServerPackages())
"""


def run_without_server_packages(body: str) -> subprocess.CompletedProcess[str]:
    script = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def test_the_blocker_really_blocks() -> None:
    done = run_without_server_packages("import fastapi")
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr


def test_mapping_imports_and_works_with_only_the_core_dependencies() -> None:
    done = run_without_server_packages(
        """
        import sys
        import aais_agui.mapping
        from aais_agui import request_to_interrupt, resume_entry_for
        from aais_langgraph import build_decision
        from aais_langgraph.protocol import build_request

        requested = build_request(
            {"kind": "fs.delete", "name": "delete_file", "summary": "Delete it", "arguments": {}},
            origin={"harness": "test", "session_id": "s-1"},
        )
        interrupt = request_to_interrupt(requested, interrupt_id="i-1")
        assert interrupt.metadata["aais"]["request"]["id"] == requested.request.id
        decided = build_decision(requested, decision="approve", actor={"id": "a", "type": "human"})
        assert resume_entry_for(decided, interrupt_id="i-1").interrupt_id == "i-1"
        loaded = {"fastapi", "starlette", "uvicorn", "ag_ui_langgraph"} & set(sys.modules)
        assert not loaded, loaded
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_server_name_raises_import_error_naming_the_extra() -> None:
    done = run_without_server_packages(
        """
        import aais_agui
        for name in ("create_app", "AAISLangGraphAgent", "bearer_token_authenticator"):
            try:
                getattr(aais_agui, name)
            except ImportError as error:
                assert 'pip install "aais-langgraph[server]"' in str(error), str(error)
                assert name in str(error)
            else:
                raise AssertionError(name + " imported without the server extra")
        try:
            from aais_agui import create_app  # noqa: F401
        except ImportError as error:
            assert "aais-langgraph[server]" in str(error)
        else:
            raise AssertionError("from-import succeeded")
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_server_names_resolve_lazily_when_the_extra_is_installed() -> None:
    import aais_agui
    from aais_agui.http.app import create_app

    assert aais_agui.create_app is create_app
    assert set(aais_agui.__all__) <= set(dir(aais_agui)) | set(aais_agui._SERVER_NAMES)


def test_the_command_without_the_server_extra_names_it(tmp_path: object) -> None:
    done = run_without_server_packages(
        f"""
        from aais_agui.cli import main
        raise SystemExit(main(["demo", "--port", "0", "--db", {str(tmp_path) + "/d.db"!r}]))
        """
    )
    assert done.returncode == 1
    assert "aais-langgraph[server" in done.stderr
    assert "Traceback" not in done.stderr
