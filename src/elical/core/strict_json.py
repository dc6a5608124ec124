"""JSON read strictly: besides malformed text, a key given twice in one object and nesting deeper than
:data:`MAX_DEPTH` levels are errors (the standard reader keeps the last value and recurses until it
breaks). Every reader of a user's JSON and JSONL files goes through :func:`loads`."""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from typing import Any

MAX_DEPTH = 100  # lists and objects inside each other; records need 3, settings a few more


class JsonError(ValueError):
    """Text that is not JSON elical reads; ``line``: the line of the text at fault, where known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict; a key given twice raises _DuplicateKey."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def loads(text: str) -> Any:
    """The value of a JSON text; a JsonError (naming the key, the column or the depth) if it is malformed,
    repeats a key in one object or nests more than MAX_DEPTH levels."""
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as dup:
        raise JsonError(f"duplicate key {dup.key!r} in one JSON object (each key may appear once)",
                        _line_of_duplicate(text)) from None
    except json.JSONDecodeError as err:
        raise JsonError(f"malformed JSON ({err.msg} at column {err.colno})", err.lineno) from None
    except RecursionError:
        raise JsonError(f"JSON nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as err:  # an integer of more than 4300 digits
        raise JsonError(f"unreadable JSON ({' '.join(str(err).split())[:120]})") from None
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):  # counting is cheap; most texts stop here
        raise JsonError(f"JSON nested more than {MAX_DEPTH} levels deep")
    return value


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts nest more than ``limit`` levels in ``value`` (walked without recursion)."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _line_of_duplicate(text: str) -> int | None:
    """The line where the object repeating a key starts, found again by the pure-Python scanner (slow:
    for the error message only); None if it cannot say."""
    starts: list[int] = []

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> Any:
        try:
            return json.decoder.JSONObject(s_and_end, *args)  # type: ignore[attr-defined]
        except _DuplicateKey:
            starts.append(s_and_end[1] - 1)  # the innermost object first
            raise

    decoder = json.JSONDecoder(object_pairs_hook=_unique_pairs)
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except (_DuplicateKey, RecursionError, ValueError):
        pass
    return text.count("\n", 0, starts[0]) + 1 if starts else None


def describe(value: Any) -> str:
    """A JSON value for an error message: containers by size only (never their content, which may nest
    deeply), null as null, anything else by type and value ("str 'x'", "bool True"), at most 80 characters."""
    if isinstance(value, list):
        return f"a list of {len(value)} element(s)"
    if isinstance(value, dict):
        return f"an object of {len(value)} key(s)"
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]
