"""Typed models built in hot loops without per-field work.

A scan turns every kept line into a `RawRecord` (the connector boundary). pydantic's
`model_construct` resolves each field's default on every call (about 10 µs for RawRecord);
the values a scanner passes are its own, typed already. `constructor(Model)` precomputes the
defaults once and returns a builder that does what `model_construct` does with them. Only
for models whose defaults are immutable (checked when the builder is made).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def constructor(cls: type[M]) -> Callable[..., M]:
    """A `model_construct` for `cls` whose defaults are computed once."""
    # every field in declaration order (so dumps keep the order model_construct gives);
    # the caller's values overwrite the placeholders of the required ones
    template: dict[str, Any] = {}
    required = set()
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"{cls.__name__}.{name} has a default factory: use model_construct")
        if field.is_required():
            required.add(name)
        elif not isinstance(field.default, (str, int, float, bool, type(None), tuple)):
            raise TypeError(f"{cls.__name__}.{name} has a mutable default")
        template[name] = field.default if not field.is_required() else None
    setattr_ = object.__setattr__
    # A frozen model's set of explicitly set fields is never changed in place (pydantic
    # copies it for model_copy), so objects built with the same keywords share one: for a
    # RawRecord it is a third of the object's memory, and a scan builds one per kept line.
    shared: dict[tuple[str, ...], set[str]] | None = (
        {} if cls.model_config.get("frozen") else None
    )

    def build(**values: Any) -> M:
        if not required <= values.keys():
            raise TypeError(f"{cls.__name__}: missing {sorted(required - values.keys())}")
        obj = cls.__new__(cls)
        fields = template.copy()
        fields.update(values)
        setattr_(obj, "__dict__", fields)
        if shared is None:
            fields_set = set(values)
        else:
            names = tuple(values)
            fields_set = shared.get(names) or shared.setdefault(names, set(values))
        setattr_(obj, "__pydantic_fields_set__", fields_set)
        setattr_(obj, "__pydantic_extra__", None)
        setattr_(obj, "__pydantic_private__", None)
        return obj

    build.__doc__ = f"{cls.__name__}.model_construct with defaults computed once."
    return build
