"""The state keys of a compiled ``StateGraph`` read from LangGraph's channels, for states
pydantic cannot describe.

ag-ui-langgraph lists a graph's input, output, config and context keys from their
JSON Schemas, which pydantic builds; pydantic refuses a ``typing.TypedDict`` before
Python 3.12 (and any type it has no schema for), so every served run of such a
graph failed. LangGraph itself keeps, per schema, the channels it reads and writes:
the same keys, without pydantic.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from langgraph.graph.state import CompiledStateGraph


def graph_schema_keys(
    graph: CompiledStateGraph[Any, Any, Any, Any], constant_keys: Sequence[str] = ()
) -> dict[str, list[str]]:
    """``{"input", "output", "config", "context"}`` key lists as ag-ui-langgraph builds
    them, from ``graph``'s channels; ``constant_keys`` are added to input and output."""
    builder = graph.builder
    return {
        "input": [*_schema_keys(builder, builder.input_schema), *constant_keys],
        "output": [*_schema_keys(builder, builder.output_schema), *constant_keys],
        "config": _config_keys(graph),
        "context": _annotated_keys(getattr(builder, "context_schema", None)),
    }


def _schema_keys(builder: Any, schema: Any) -> list[str]:
    channels = builder.schemas.get(schema)
    if channels is None:
        return _annotated_keys(schema)
    return [key for key in channels if key != "__root__"]


def _annotated_keys(schema: Any) -> list[str]:
    annotations = getattr(schema, "__annotations__", None)
    return list(annotations) if isinstance(annotations, dict) else []


def _config_keys(graph: Any) -> list[str]:
    try:
        with warnings.catch_warnings():  # deprecated in LangGraph 1.x; ag-ui-langgraph reads it
            warnings.simplefilter("ignore", DeprecationWarning)
            schema = graph.get_config_jsonschema()
    except Exception:  # the config schema, too, may be one pydantic cannot build
        return []
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return list(properties) if isinstance(properties, dict) else []
