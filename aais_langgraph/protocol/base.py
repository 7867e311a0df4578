"""The pydantic base every AAIS model shares, and the schema's constrained field types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails
from typing_extensions import Self

from .errors import AAISValidationError, join_pointer
from .ijson import DEFAULT_MAX_DEPTH, MAX_SAFE_INTEGER, check_ijson
from .patterns import DIGEST as _DIGEST
from .patterns import EXTENSION_KEY as _EXTENSION_KEY
from .patterns import ID as _ID
from .patterns import MAX_ID_LENGTH
from .timestamps import parse_timestamp


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


# Validation context key carrying the nesting bound of the document being validated.
MAX_DEPTH_CONTEXT = "aais_max_depth"
# Validation context key of a builder that took the action digest itself: the pair
# (the Action model, its digest). Only the protocol's builders set it.
TAKEN_DIGEST_CONTEXT = "aais_taken_digest"


def _context_max_depth(info: ValidationInfo) -> int:
    context = info.context
    if isinstance(context, Mapping):
        bound = context.get(MAX_DEPTH_CONTEXT)
        if isinstance(bound, int):
            return bound
    return DEFAULT_MAX_DEPTH


def _check_ijson_value(value: Any, info: ValidationInfo) -> Any:
    # Runs before pydantic's own dict checks, so a non-string key is reported at its
    # object rather than echoed in the error location.
    check_ijson(value, max_depth=_context_max_depth(info))
    return value


def _check_extension_keys(value: dict[str, Any]) -> dict[str, Any]:
    for key in value:
        if _EXTENSION_KEY.match(key) is None:
            raise AAISValidationError(
                join_pointer("", key), "extension keys must be namespaced (a URL or domain/ prefix)"
            )
    return value


def _check_unicode(value: str) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("string contains a lone surrogate") from None
    return value


Id = Annotated[
    StrictStr,
    StringConstraints(min_length=1, max_length=MAX_ID_LENGTH),
    AfterValidator(_check_id),
]
Timestamp = Annotated[StrictStr, AfterValidator(_check_timestamp)]
Digest = Annotated[StrictStr, AfterValidator(_check_digest)]
Sequence = Annotated[StrictInt, Field(ge=0, le=MAX_SAFE_INTEGER)]
JsonObject = Annotated[dict[StrictStr, Any], BeforeValidator(_check_ijson_value)]
Extensions = Annotated[
    dict[StrictStr, Any],
    BeforeValidator(_check_ijson_value),
    AfterValidator(_check_extension_keys),
]

# Non-empty strings of bounded length (the schema's minLength 1 / maxLength n).
Text200 = Annotated[
    StrictStr, StringConstraints(min_length=1, max_length=200), AfterValidator(_check_unicode)
]
Text1000 = Annotated[
    StrictStr, StringConstraints(min_length=1, max_length=1000), AfterValidator(_check_unicode)
]
Text2000 = Annotated[
    StrictStr, StringConstraints(min_length=1, max_length=2000), AfterValidator(_check_unicode)
]
Text4096 = Annotated[
    StrictStr, StringConstraints(min_length=1, max_length=4096), AfterValidator(_check_unicode)
]
Text10000 = Annotated[
    StrictStr, StringConstraints(min_length=1, max_length=10000), AfterValidator(_check_unicode)
]


def _safe_location(error: ErrorDetails) -> tuple[str | int, ...]:
    """pydantic's location, cut before any object key that is not a valid member name.

    A non-string key would otherwise be echoed into the pointer (and so the message).
    """
    location = tuple(error["loc"])
    if error["type"] == "invalid_key":
        location = location[:-1]
    if "[key]" in location:
        location = location[: max(location.index("[key]") - 1, 0)]
    return location


def pydantic_error_to_aais(error: ValidationError, pointer: str = "") -> AAISValidationError:
    """Turn pydantic's first error into our error: a JSON pointer and a value-free reason."""
    first = error.errors(include_input=False, include_url=False)[0]
    location = join_pointer(pointer, *_safe_location(first))
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, AAISValidationError):
        return AAISValidationError(location + cause.pointer, cause.reason)
    reason = first["msg"]
    if reason.startswith("Value error, "):
        reason = reason[len("Value error, ") :]
    return AAISValidationError(location, reason)


def _is_absent(value: Any) -> bool:
    return value is None


def absent(**constraints: Any) -> Any:
    """The default of an optional AAIS field: None while the field is absent, and then
    left out of every dump (``constraints``: the field's other ``Field`` arguments).

    Dropping the field per field (``exclude_if``) leaves a dump to pydantic-core;
    a model-wide wrap serializer would call back into Python for every nested model."""
    return Field(default=None, exclude_if=_is_absent, **constraints)


class AAISModel(BaseModel):
    """Strict, immutable model: unknown fields and explicit nulls are rejected.

    Optional fields (their default is :func:`absent`) that are absent are omitted on
    dump, so ``model_dump(mode="json")`` is a schema-valid AAIS document.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_nulls(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key, value in data.items():
                if value is None and key in cls.model_fields:
                    raise AAISValidationError(
                        join_pointer("", key), "optional fields are omitted, never null"
                    )
        return data

    @classmethod
    def from_data(
        cls,
        data: Self | Mapping[str, Any],
        *,
        pointer: str = "",
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Self:
        """Accept a model or an equivalent plain mapping; raise AAISValidationError otherwise.

        ``pointer`` prefixes error locations; ``max_depth`` bounds the nesting of
        free-form objects (``arguments``, ``scope_constraints``, ``extensions``).
        """
        if isinstance(data, cls):
            return data
        if isinstance(data, BaseModel):
            # Python mode keeps values as they are; JSON mode would turn NaN into null.
            data = data.model_dump(warnings=False)
        if not isinstance(data, Mapping):
            raise AAISValidationError(pointer, "expected a JSON object")
        try:
            return cls.model_validate(dict(data), context={MAX_DEPTH_CONTEXT: max_depth})
        except ValidationError as error:
            raise pydantic_error_to_aais(error, pointer) from None

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict form (``model_dump(mode="json")``)."""
        return self.model_dump(mode="json")
