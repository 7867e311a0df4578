"""The pydantic base every AAIS model shares, and the schema's constrained field types."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)
from typing_extensions import Self

from .errors import AAISValidationError, join_pointer
from .ijson import DEFAULT_MAX_DEPTH, MAX_SAFE_INTEGER, check_ijson
from .timestamps import parse_timestamp

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_EXTENSION_KEY = re.compile(r"(https?://|[A-Za-z0-9-]+\.[A-Za-z0-9.-]+/)", re.ASCII)


def _check_id(value: str) -> str:
    if _ID.fullmatch(value) is None:
        raise ValueError("not an AAIS id (letters, digits and . _ : - only)")
    return value


def _check_digest(value: str) -> str:
    if _DIGEST.fullmatch(value) is None:
        raise ValueError("not a sha256: digest of 64 lowercase hex digits")
    return value


def _check_timestamp(value: str) -> str:
    parse_timestamp(value)
    return value


def _check_ijson_object(value: dict[str, Any]) -> dict[str, Any]:
    check_ijson(value, max_depth=DEFAULT_MAX_DEPTH)
    return value


def _check_extensions(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        if _EXTENSION_KEY.match(key) is None:
            raise ValueError("extension keys must be namespaced (a URL or domain/ prefix)")
    return _check_ijson_object(value)


Id = Annotated[StrictStr, StringConstraints(min_length=1, max_length=200), AfterValidator(_check_id)]
Timestamp = Annotated[StrictStr, AfterValidator(_check_timestamp)]
Digest = Annotated[StrictStr, AfterValidator(_check_digest)]
Sequence = Annotated[StrictInt, Field(ge=0, le=MAX_SAFE_INTEGER)]
JsonObject = Annotated[dict[StrictStr, Any], AfterValidator(_check_ijson_object)]
Extensions = Annotated[dict[StrictStr, Any], AfterValidator(_check_extensions)]


def Text(max_length: int) -> Any:  # noqa: N802 - reads like a type in field declarations
    """A non-empty string of at most ``max_length`` characters."""
    return Annotated[StrictStr, StringConstraints(min_length=1, max_length=max_length)]


def pydantic_error_to_aais(error: ValidationError, pointer: str = "") -> AAISValidationError:
    """Turn pydantic's first error into our error: a JSON pointer and a value-free reason."""
    first = error.errors(include_input=False, include_url=False)[0]
    location = join_pointer(pointer, *first["loc"])
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, AAISValidationError):
        return AAISValidationError(location + cause.pointer, cause.reason)
    reason = first["msg"]
    if reason.startswith("Value error, "):
        reason = reason[len("Value error, ") :]
    return AAISValidationError(location, reason)


class AAISModel(BaseModel):
    """Strict, immutable model: unknown fields and explicit nulls are rejected.

    Optional fields that are absent are omitted on dump, so ``model_dump(mode="json")``
    is a schema-valid AAIS document.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_nulls(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, value in data.items():
                if value is None and key in cls.model_fields:
                    raise ValueError(f"field {key!s} must not be null")
        return data

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {key: value for key, value in dumped.items() if value is not None}

    @classmethod
    def from_data(cls, data: Self | Mapping[str, Any], *, pointer: str = "") -> Self:
        """Accept a model or an equivalent plain mapping; raise AAISValidationError otherwise."""
        if isinstance(data, cls):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json")
        if not isinstance(data, Mapping):
            raise AAISValidationError(pointer, "expected a JSON object")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as error:
            raise pydantic_error_to_aais(error, pointer) from None

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict form (``model_dump(mode="json")``)."""
        return self.model_dump(mode="json")
