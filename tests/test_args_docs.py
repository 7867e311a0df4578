"""Every public function or method with more than three parameters documents them in an
``Args:`` section, so the API reference reads on its own.

Two kinds are documented elsewhere and pass: an async twin whose docstring names its sync
twin (``Async twin of :meth:`x```, or one referring to ``:func:`x``` / ``:meth:`x```), and a
backend's override without a docstring of its own (it inherits the contract's). A class's
``__init__`` is documented by the class docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aais_langgraph", "aais_agui")


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    arguments = function.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    names += [f"*{a.arg}" for a in (arguments.vararg,) if a is not None]
    names += [f"**{a.arg}" for a in (arguments.kwarg,) if a is not None]
    return [name for name in names if name not in ("self", "cls")]


def _overload(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in function.decorator_list
    )


def _twin_documented(name: str, doc: str, siblings: set[str]) -> bool:
    sync = name[1:]
    if not name.startswith("a") or sync not in siblings:
        return False
    return doc.startswith("Async twin of") or f":func:`{sync}`" in doc or f":meth:`{sync}`" in doc


def _undocumented(path: Path, label: str) -> list[str]:
    """``label:line name`` of each public function in ``path`` that should say ``Args:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def visit(node: ast.AST, prefix: str, owner: ast.ClassDef | None) -> None:
        body = getattr(node, "body", [])
        siblings = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for child in body:
            if isinstance(child, ast.ClassDef):
                if not child.name.startswith("_"):
                    visit(child, f"{prefix}{child.name}.", child)
                continue
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            name = child.name
            if (name.startswith("_") and name != "__init__") or _overload(child):
                continue
            if len(_parameters(child)) <= 3:
                continue
            own = ast.get_docstring(child)
            doc = own or ""
            if name == "__init__" and owner is not None:
                doc += ast.get_docstring(owner) or ""
            inherited = own is None and owner is not None and bool(owner.bases)
            if "Args:" in doc or inherited or _twin_documented(name, doc, siblings):
                continue
            found.append(f"{label}:{child.lineno} {prefix}{name}")

    visit(tree, "", None)
    return found


def _modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(part.startswith("_") and part != "__init__.py" for part in path.parts)
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_public_functions_with_many_parameters_document_them(package: str) -> None:
    missing = [
        line
        for path in _modules()
        if path.relative_to(ROOT).parts[0] == package
        for line in _undocumented(path, str(path.relative_to(ROOT)))
    ]
    assert missing == []


def test_the_check_finds_an_undocumented_function(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def public(a, b, c, d):\n    '''No arguments named.'''\n\n\n"
        "def documented(a, b, c, d):\n    '''Named.\n\n    Args:\n        a: one.\n    '''\n\n\n"
        "async def apublic(a, b, c, d):\n    '''Async twin of :func:`public`.'''\n",
        encoding="utf-8",
    )
    assert [line.split()[-1] for line in _undocumented(sample, "sample.py")] == ["public"]
