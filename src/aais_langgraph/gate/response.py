"""The resume value a gate accepts, as a pydantic type LangGraph validates for us.

LangGraph validates a resume value against a pydantic ``response_schema`` and, on
mismatch, raises without saving anything, so the interrupt stays pending. The
type accepts only an ``approval.decided`` for this request id and digest with an
offered (decision, scope) pair, or an ``approval.resolved`` notice for this
request (used when the decision was recorded elsewhere, e.g. a cancel).
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, create_model, model_validator

from ..protocol import ApprovalDecided, ApprovalResolved, Decision, Request, Resolution


class _AcceptModels(BaseModel):
    """Lets callers resume with an envelope model as well as a plain dict."""

    @model_validator(mode="before")
    @classmethod
    def _from_model(cls, data: Any) -> Any:
        if isinstance(data, BaseModel) and not isinstance(data, cls):
            return data.model_dump(mode="json")
        return data


def response_type(request: Request) -> Any:
    """A pydantic type matching exactly the answers this request can take."""
    bodies = tuple(
        create_model(
            f"Decision_{choice.decision}_{choice.scope}",
            __base__=Decision,
            request_id=(Literal[request.id], ...),  # type: ignore[valid-type]
            action_digest=(Literal[request.action_digest], ...),  # type: ignore[valid-type]
            decision=(Literal[choice.decision], ...),  # type: ignore[valid-type]
            scope=(Literal[choice.scope], ...),  # type: ignore[valid-type]
        )
        for choice in request.choices
    )
    decided = create_model(
        "ApprovalDecidedForRequest",
        __base__=(ApprovalDecided, _AcceptModels),
        decision=(Union[bodies], ...),  # type: ignore[valid-type]  # noqa: UP007
    )
    notice_body = create_model(
        "ResolutionOfRequest",
        __base__=Resolution,
        request_id=(Literal[request.id], ...),  # type: ignore[valid-type]
    )
    notice = create_model(
        "ApprovalResolvedForRequest",
        __base__=(ApprovalResolved, _AcceptModels),
        resolution=(notice_body, ...),
    )
    return Union[decided, notice]  # noqa: UP007
