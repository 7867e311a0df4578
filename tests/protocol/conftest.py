"""Shared data for the protocol tests: the public conformance fixtures and a schema validator."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

CONFORMANCE = Path(__file__).resolve().parent.parent / "conformance"
FIXTURE_DIGEST = "sha256:157f438a55ce7db6aa61c8515f0b48ce2851b9bad6c5b67bb3eb34ff353fd9d8"
SECRET = "sk-live-SECRET123"


def fixture_text(name: str) -> str:
    """The fixture file's text, exactly as published."""
    return (CONFORMANCE / name).read_text(encoding="utf-8")


def fixture(name: str) -> dict[str, Any]:
    """A fresh plain-JSON copy of a conformance fixture."""
    document: dict[str, Any] = json.loads(fixture_text(name))
    return copy.deepcopy(document)


def schema_validator() -> jsonschema.Draft202012Validator:
    """The AAIS 1.0 schema from the conformance folder, with format checking on."""
    schema = json.loads(fixture_text("aais-1.0.schema.json"))
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.fixture
def shell_request() -> dict[str, Any]:
    """``shell-approval.json``: an approval.requested envelope."""
    return fixture("shell-approval.json")


@pytest.fixture
def approve_once() -> dict[str, Any]:
    """``approve-once.json``: the matching approval.decided envelope."""
    return fixture("approve-once.json")
