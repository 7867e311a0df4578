"""The resume value a gate accepts, judged while LangGraph validates it.

``interrupt(value, response_schema=T)`` validates the resume value against ``T``
*before* it records the value as the task's answer. An exception raised there
leaves nothing behind: the interrupt stays pending and a later, correct answer
is accepted. An exception raised after ``interrupt()`` returned is different:
LangGraph has already saved the answer, so every later resume of the task is
handed the same bad value again and the approval can never be answered. So
everything that can refuse an answer runs inside validation:

- the shape (an ``approval.decided`` or an ``approval.resolved`` notice),
- the binding (this request id, this digest, an offered decision and scope),
- the authority's judgement (an ``invalid`` or ``conflict``ing decision, a
  notice with no recorded resolution behind it).

Binding and shape errors surface as ``pydantic.ValidationError`` (input values
hidden); the authority's refusals as :class:`RejectedResumeError`. Both are
marked as invalid resumes (``langgraph.errors.is_invalid_resume``).

LangGraph builds a ``TypeAdapter`` of ``T`` on every ``interrupt()`` call, so
:class:`AnswerType` is a light object carrying a ready plain-validator schema (a few
microseconds to adapt, where creating pydantic models per request cost
milliseconds), and its JSON Schema is a compact document built per request. A gate
that is sure to pause passes that document itself, so pydantic never generates it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Union, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import (
    InitErrorDetails,
    PydanticCustomError,
    SchemaSerializer,
    SchemaValidator,
    core_schema,
)

from ..authority.judgement import judge
from ..protocol import AAISValidationError, ApprovalDecided, ApprovalResolved, Request
from ..protocol.answer_schema import decided_schema, envelope_schema
from .seams import mark_invalid_resume

BoundAnswer = Union[ApprovalDecided, ApprovalResolved]  # noqa: UP007
_Envelopes = Annotated[BoundAnswer, Field(discriminator="type")]


class RejectedResumeError(AAISValidationError):
    """The resume value cannot answer this request; the interrupt stays pending.

    ``code`` says why, for code that reacts to a refusal (never read the message):
    ``"refused"`` (the authority or policy refused the answer), ``"claimed"``
    (another run is executing the approval), ``"execution_unknown"`` (see
    :class:`~aais_langgraph.gate.ExecutionUnknownError`).
    """

    def __init__(self, pointer: str, reason: str, *, code: str = "refused") -> None:
        super().__init__(pointer, reason)
        self.code = code


class RefusalCarrier(Exception):
    """Carries a refusal through pydantic untouched (it is not a ``ValueError``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def refuse(pointer: str, reason: str) -> RefusalCarrier:
    """A :class:`RejectedResumeError` (marked as an invalid resume) ready to raise."""
    error = RejectedResumeError(pointer, reason)
    mark_invalid_resume(error)
    return RefusalCarrier(error)


def _binding_error(location: tuple[str, ...], reason: str) -> RefusalCarrier:
    details: InitErrorDetails = {
        "type": PydanticCustomError("aais_binding", reason.replace("{", "(").replace("}", ")")),
        "loc": location,
        "input": None,
    }
    error = ValidationError.from_exception_data("approval answer", [details], hide_input=True)
    mark_invalid_resume(error)
    return RefusalCarrier(error)


def _without_input(error: ValidationError) -> ValidationError:
    """The same errors with the submitted values dropped (they may hold arguments)."""
    details: list[InitErrorDetails] = []
    for line in error.errors(include_url=False, include_input=False):
        reason = str(line["msg"]).replace("{", "(").replace("}", ")")
        details.append(
            {
                "type": PydanticCustomError(str(line["type"]), reason),
                "loc": tuple(line["loc"]),
                "input": None,
            }
        )
    cleaned = ValidationError.from_exception_data(error.title, details, hide_input=True)
    mark_invalid_resume(cleaned)
    return cleaned


@functools.lru_cache(maxsize=1)
def _envelopes() -> TypeAdapter[BoundAnswer]:
    return TypeAdapter(_Envelopes, config=ConfigDict(hide_input_in_errors=True))


_BINDING = {
    "request": "the decision is for another request",
    "digest": "does not match the requested action",
    "choice": "this decision and scope were not offered",
}
"""What the schema validation of a resume value says for each binding rule it refuses."""


Translate = Callable[[Any], BoundAnswer]
"""Reads a resume value that is not an AAIS envelope (a LangChain UI answer, see
:mod:`.langchain_ui`) as the bound answer it means, or raises :class:`RefusalCarrier`."""


def parse_answer(request: Request, value: Any, translate: Translate | None = None) -> BoundAnswer:
    """The answer as an envelope bound to ``request``, or raise :class:`RefusalCarrier`.

    ``translate`` reads any value that is not an AAIS envelope (one without ``aais``)."""
    if isinstance(value, BaseModel) and not isinstance(value, (ApprovalDecided, ApprovalResolved)):
        value = value.model_dump(mode="json")
    envelope = isinstance(value, (ApprovalDecided, ApprovalResolved)) or (
        isinstance(value, Mapping) and "aais" in value
    )
    if translate is not None and not envelope:
        value = translate(value)
        if not isinstance(value, (ApprovalDecided, ApprovalResolved)):
            # Read, to be recorded once accepted (an async gate's edit or ignore).
            return cast(BoundAnswer, value)
    try:
        answer = _envelopes().validate_python(value)
    except ValidationError as error:
        raise RefusalCarrier(_without_input(error)) from None
    if isinstance(answer, ApprovalDecided):
        # The authority's judgement, before its clock and the ledger (they judge next).
        verdict = judge(request, answer.decision, now=None, expires_at=None)
        if verdict.rule in _BINDING:
            location = tuple(part for part in verdict.pointer.split("/") if part)
            raise _binding_error(location, _BINDING[verdict.rule])
    elif answer.resolution.request_id != request.id:
        raise _binding_error(("resolution", "request_id"), "the resolution is for another request")
    return answer


class AnswerType:
    """A ``response_schema`` for ``interrupt()``: validates, binds and judges the answer.

    ``settle`` receives the bound envelope and returns what ``interrupt()`` should
    return, or raises :class:`RefusalCarrier`; the gate catches the refusal around
    ``interrupt()`` and raises the error it carries.

    It carries its own core schema, validator and serializer (pydantic's
    ``__pydantic_*__`` attributes), so the ``TypeAdapter`` LangGraph builds on every
    ``interrupt()`` call takes them as they are (a few microseconds) instead of
    generating them.
    """

    __slots__ = (
        "__pydantic_core_schema__",
        "__pydantic_serializer__",
        "__pydantic_validator__",
        "request",
        "settle",
        "translate",
    )

    def __init__(
        self,
        request: Request,
        settle: Callable[[BoundAnswer], Any],
        translate: Translate | None = None,
    ) -> None:
        self.request = request
        self.settle = settle
        self.translate = translate
        schema = core_schema.no_info_plain_validator_function(
            self._validate, metadata={"pydantic_js_functions": [self.__get_pydantic_json_schema__]}
        )
        self.__pydantic_core_schema__ = schema
        self.__pydantic_validator__ = SchemaValidator(schema)
        self.__pydantic_serializer__ = SchemaSerializer(schema)

    def _validate(self, value: Any) -> Any:
        return self.settle(parse_answer(self.request, value, self.translate))

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return self.__pydantic_core_schema__

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return self.json_schema()

    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the answers this type accepts (what clients are shown)."""
        return response_json_schema(self.request)


def response_json_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of the answers ``request`` accepts: an ``approval.decided`` with this
    id, digest and an offered choice, or an ``approval.resolved`` notice for it."""
    resolution = {
        "type": "object",
        "required": ["id", "request_id", "action_digest", "resolved_at", "outcome", "message"],
        "properties": {"request_id": {"const": request.id}},
    }
    return {
        "oneOf": [
            decided_schema(request),
            envelope_schema("approval.resolved", "resolution", resolution),
        ]
    }
