"""The ag-ui-langgraph seams AAISLangGraphAgent overrides: fail loudly if an upgrade moves them.

The ``server`` extra allows ag-ui-langgraph ``>=0.0.47,<0.1``; the seams were read on
0.0.47. ``scripts/ci_newest_agui.sh`` (run by ``.ci/run``) runs these tests against the
newest release and fails CI when one of them fails there ("seam moved"): then re-read
``LangGraphAgent.prepare_stream`` / ``_prepare_interrupt_tail`` / ``_emit_interrupt_finish``
and update these checks together with ``aais_agui.agent``, or cap the range.
"""

from __future__ import annotations

import inspect
from importlib.metadata import version

from ag_ui_langgraph import LangGraphAgent
from packaging.version import Version

from aais_agui.agent import AAISLangGraphAgent


def _parameters(function: object) -> list[tuple[str, str, object]]:
    return [
        (p.name, p.kind.name, p.default)
        for p in inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    ]


def test_ag_ui_langgraph_is_in_the_declared_range() -> None:
    installed = Version(version("ag-ui-langgraph"))
    assert Version("0.0.47") <= installed < Version("0.1"), "outside the server extra's range"


def test_interrupts_to_agui_seam_has_the_expected_signature() -> None:
    assert _parameters(LangGraphAgent._interrupts_to_agui) == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("lg_interrupts", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
    ]


def test_build_command_seam_has_the_expected_signature() -> None:
    assert _parameters(LangGraphAgent._build_command_from_agui_resume) == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("entries", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("open_interrupts", "KEYWORD_ONLY", None),
    ]


def test_prepare_stream_builds_the_resume_command_through_the_seam() -> None:
    source = inspect.getsource(LangGraphAgent.prepare_stream)
    assert "self._build_command_from_agui_resume(" in source
    assert "self._interrupts_to_agui(interrupts)" in source
    assert "events_to_dispatch" in source, "the re-emit of pending interrupts moved"


def test_interrupt_tail_maps_each_interrupt_through_the_seam() -> None:
    assert "self._interrupts_to_agui([raw])" in inspect.getsource(
        LangGraphAgent._prepare_interrupt_tail
    )
    finish = inspect.getsource(LangGraphAgent._emit_interrupt_finish)
    assert "emit_interrupt_outcome" in finish and "RunFinishedInterruptOutcome" in finish


def test_constructor_accepts_the_flags_the_agent_sets() -> None:
    names = set(inspect.signature(LangGraphAgent.__init__).parameters)
    assert {
        "name",
        "graph",
        "description",
        "config",
        "enable_legacy_on_interrupt_event",
        "emit_interrupt_outcome",
        "emit_raw_events",
    } <= names


def test_the_agent_still_overrides_exactly_these_methods() -> None:
    overridden = {
        name
        for name, member in vars(AAISLangGraphAgent).items()
        if callable(member) and hasattr(LangGraphAgent, name)
    }
    assert overridden == {
        "__init__",
        "clone",
        "get_capabilities",
        "run",
        "_interrupts_to_agui",
        "_build_command_from_agui_resume",
        "_emit_interrupt_finish",
        "_handle_stream_events",
        "get_schema_keys",
    }


def test_interrupt_finish_seam_sends_the_legacy_event_as_a_custom_event() -> None:
    # AAISLangGraphAgent._emit_interrupt_finish drops the on_interrupt event of approvals.
    assert _parameters(LangGraphAgent._emit_interrupt_finish) == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("thread_id", "KEYWORD_ONLY", inspect.Parameter.empty),
        ("run_id", "KEYWORD_ONLY", inspect.Parameter.empty),
        ("lg_interrupts", "KEYWORD_ONLY", inspect.Parameter.empty),
    ]
    finish = inspect.getsource(LangGraphAgent._emit_interrupt_finish)
    assert "name=LangGraphEventTypes.OnInterrupt.value" in finish
    assert "value=dump_json_safe(raw.value)" in finish and "raw_event=raw," in finish


def test_run_streams_through_the_handle_stream_events_seam() -> None:
    # AAISLangGraphAgent._handle_stream_events gives an AAIS refusal inside a run its code.
    assert _parameters(LangGraphAgent._handle_stream_events) == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("input", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
    ]
    assert "self._handle_stream_events(input.model_copy(" in inspect.getsource(LangGraphAgent.run)


def test_overrides_keep_the_seam_signatures() -> None:
    for name in (
        "_interrupts_to_agui",
        "_build_command_from_agui_resume",
        "_emit_interrupt_finish",
        "_handle_stream_events",
    ):
        ours = [p[:2] for p in _parameters(getattr(AAISLangGraphAgent, name))]
        theirs = [p[:2] for p in _parameters(getattr(LangGraphAgent, name))]
        assert ours == theirs, name


def _forwarded_keys_read() -> set[str]:
    import re

    import ag_ui_langgraph.agent as module

    source = inspect.getsource(module)
    got = re.findall(
        r"forwarded(?:_props)?(?:\)|\s*or\s*\{\})?\s*\.get\(\s*['\"](\w+)['\"]", source
    )
    tested = re.findall(r"['\"](\w+)['\"]\s+in\s+forwarded", source)
    indexed = re.findall(r"forwarded\w*\[['\"](\w+)", source)
    return set(got) | set(tested) | set(indexed)


def test_the_forwarded_props_ag_ui_langgraph_reads_are_the_screened_ones() -> None:
    from aais_agui.agent import STEERING_PROPS

    # Steering keys are refused by AAISLangGraphAgent.run; the rest only tune streaming
    # or add a tool. A new key read here must be judged before widening the pin.
    harmless = {"stream_subgraphs", "inject_a2_u_i_tool", "injectA2UITool"}
    assert _forwarded_keys_read() == STEERING_PROPS | harmless


def test_forwarded_props_keys_are_snake_cased_with_the_function_the_agent_uses() -> None:
    from ag_ui_langgraph.utils import camel_to_snake

    assert "camel_to_snake(k)" in inspect.getsource(LangGraphAgent.run)
    assert [camel_to_snake(k) for k in ("nodeName", "Command", "command")] == [
        "node_name",
        "command",
        "command",
    ]
    prepare = inspect.getsource(LangGraphAgent.prepare_stream)
    assert "Command(resume=resume_payload)" in prepare, "the legacy resume channel moved"
    assert 'as_node=self.active_run.get("node_name")' in prepare, "nodeName's state write moved"


def test_schema_keys_seam_has_the_expected_signature() -> None:
    assert _parameters(LangGraphAgent.get_schema_keys) == [
        ("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
        ("config", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty),
    ]
    assert 'self.active_run["schema_keys"] = self.get_schema_keys(config)' in inspect.getsource(
        LangGraphAgent.prepare_stream
    ), "prepare_stream no longer reads the schema keys through the seam"
