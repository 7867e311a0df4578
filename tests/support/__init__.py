"""Helpers shared by several test folders (imported as ``support`` from tests/conftest.py)."""
