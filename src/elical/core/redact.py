"""Keep credentials out of every file and log line: one function for URLs, messages and known keys."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable

MASK = "***"
# user:password@ (or a bare token@) after a scheme, up to the authority's last "@" (a password may hold one);
# key-like query parameters; and Authorization values a server may echo ("Basic <base64 of user:password>").
_USERINFO = re.compile(r"(?<=://)[^/?#\s]*@")
_QUERY_KEY = re.compile(r"([?&](?:api[_-]?key|key|token|access_token|password)=)[^&\s#'\"]+", re.IGNORECASE)
_BASIC = re.compile(r"\b([Bb]asic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])")
_BEARER = re.compile(r"\b([Bb]earer\s+)([A-Za-z0-9._~+/=-]{6,})")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with URL credentials (``user:password@``, ``?api_key=``), Authorization values (``Basic …``,
    ``Bearer …``) and each of ``secrets`` masked."""
    text = _QUERY_KEY.sub(rf"\g<1>{MASK}", _USERINFO.sub(f"{MASK}@", text))
    text = _BASIC.sub(lambda m: m.group(1) + MASK if _is_userinfo(m.group(2)) else m.group(0), text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK if _is_token(m.group(2)) else m.group(0), text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def _is_userinfo(value: str) -> bool:
    """Whether a Basic value is the base64 of ``user:password`` (not a word such as "authentication")."""
    try:
        return b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


def _is_token(value: str) -> bool:
    """Whether a Bearer value looks like a key (digits or separators in it), not a word of prose."""
    return any(ch.isdigit() or ch in "-_." for ch in value)
