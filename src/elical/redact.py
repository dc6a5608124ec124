"""Keep credentials out of every file and log line: one function for URLs, messages and known keys."""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
# user:password@ (or a bare token@) after a scheme, and key-like query parameters.
_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")
_QUERY_KEY = re.compile(r"([?&](?:api[_-]?key|key|token|access_token|password)=)[^&\s#'\"]+", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with URL credentials (``user:password@``, ``?api_key=``) and each of ``secrets`` masked."""
    text = _QUERY_KEY.sub(rf"\g<1>{MASK}", _USERINFO.sub(f"{MASK}@", text))
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text
