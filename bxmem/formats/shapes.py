"""Checks of what bxmem reads back from its own files: a value is checked whole before any of it is used. A
shape returns None or a reason naming where ("logs.s1.offset: not an integer of at least 0"), never quoting
the value (a state file may hold spans of texts).
"""

from __future__ import annotations

from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any

Shape = Callable[[object], "str | None"]


def _at(key: object, why: str) -> str:
    """`why` one level down, under `key`: "logs.s1.offset: not an integer"."""
    if ": " not in why:  # a reason, not yet a path
        return f"{key}: {why}"
    return f"{key}{why}" if why.startswith("[") else f"{key}.{why}"


def integer(low: int | None = 0, high: int | None = None) -> Shape:
    """An int (never a bool) within [low, high] (None: unbounded)."""
    what = (
        "an integer"
        + (f" of at least {low}" if low is not None else "")
        + (f" up to {high}" if high is not None else "")
    )

    def check(value: object) -> str | None:
        if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
            return f"not {what}"
        return None

    return check


def number(value: object) -> str | None:
    """An int or a float (never a bool), finite."""
    if type(value) is int or (type(value) is float and value == value and abs(value) != float("inf")):
        return None
    return "not a number"


def string(value: object) -> str | None:
    return None if type(value) is str else "not a string"


def boolean(value: object) -> str | None:
    return None if type(value) is bool else "not true or false"


def anything(value: object) -> str | None:
    return None


def one_of(*choices: object) -> Shape:
    """One of these values, of the same type (True is not 1)."""

    def check(value: object) -> str | None:
        return None if any(type(value) is type(c) and value == c for c in choices) else "not one of the values known"

    return check


def maybe(shape: Shape) -> Shape:

    def check(value: object) -> str | None:
        return None if value is None else shape(value)

    return check


def list_of(shape: Shape, *, length: int | None = None, container: type = list) -> Shape:
    def check(value: Any) -> str | None:
        if type(value) is not container:
            return f"not a {container.__name__}"
        elements: Any = value  # a list or a set: `type(...) is` narrows no further than object
        if length is not None and len(elements) != length:
            return f"not a {container.__name__} of {length}"
        for i, element in enumerate(elements):
            why = shape(element)
            if why is not None:
                return _at(f"[{i}]", why)
        return None

    return check


def set_of(shape: Shape) -> Shape:
    return list_of(shape, container=set)


def dict_of(shape: Shape, key: Shape = string) -> Shape:
    def check(value: object) -> str | None:
        if type(value) is not dict:
            return "not an object"
        for name, element in value.items():
            why = key(name)
            if why is not None:
                return f"a key is {why}"
            why = shape(element)
            if why is not None:
                return _at(name, why)
        return None

    return check


def record(required: dict[str, Shape], optional: dict[str, Shape] | None = None) -> Shape:
    """An object with every required field of its shape, and each optional one
    of its shape when present. Other fields are allowed: nothing reads them."""
    optional = optional or {}

    def check(value: object) -> str | None:
        if type(value) is not dict:
            return "not an object"
        for name, shape in required.items():
            if name not in value:
                return f"{name}: missing"  # a path already: _at prefixes it
            why = shape(value[name])
            if why is not None:
                return _at(name, why)
        for name, shape in optional.items():
            if name in value:
                why = shape(value[name])
                if why is not None:
                    return _at(name, why)
        return None

    return check


def both(*shapes: Shape) -> Shape:
    """Every one of the shapes (a type, then an invariant)."""

    def check(value: object) -> str | None:
        for shape in shapes:
            why = shape(value)
            if why is not None:
                return why
        return None

    return check


# --- shapes several files share ------------------------------------------------------------

OFFSET = integer(0)
SPAN = list_of(integer(0), length=2)  # [offset, length] of a line


def _sorted_disjoint(value: Any) -> str | None:
    last = 0
    for low, high in value:
        if not last < low <= high:
            return "not sorted disjoint ranges of numbers from 1"
        last = high
    return None


# A set of positive numbers as sorted, disjoint [low, high] ranges (decided
# turns): out of order, a lookup by bisection would miss a turn that is in it.
RANGES = both(list_of(list_of(integer(1), length=2)), _sorted_disjoint)


def problem(value: object, shape: Shape) -> str | None:
    """Why the value is not of the shape, or None. Never raises: a value too deep
    for the check to walk (nothing bxmem writes is) does not fit."""
    try:
        return shape(value)
    except RecursionError:
        return "nested too deep"
