"""What produced a result file: versions, machine, time and command line, for every output's metadata."""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from elical.core.redact import redact

_PACKAGES = ("elical", "numpy", "pandas", "scikit-learn", "torch", "transformers", "peft", "accelerate")


def provenance() -> dict[str, Any]:
    """Versions of the packages that shape results, the machine, the time and the command."""
    versions: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": redact(" ".join(sys.argv)),  # a URL on the command line may carry a password
    }
