"""Follow a tiny `elical run` through its calls (issue 27's reading test, measured instead of read).

The run is traced with :func:`sys.setprofile` (every thread); each call into an elical function counts,
its caller being the nearest elical frame below it (a callback through torch or pandas still has one).
Modules get their layer from ``tools/check_imports.py``'s ``LAYERS``. Printed:

- the elical modules the run enters, per layer;
- every call from a lower layer into a higher one (a "return to a higher layer already left"), with its count;
- per part (the package under ``elical``) below the apps layer, how many separate times the run's own
  modules (``elical.run``), and its step loop alone, enter it: consecutive calls into one part are one entry.

    python tools/trace_run.py [--out DIR]      # the tiny world run of benchmarks/same_outputs.py

Exit status 0; the figures are for reading (a benchmark of structure, not a test).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from check_imports import LAYERS  # noqa: E402
from same_outputs import TINY  # noqa: E402


def layer_of(module: str) -> int:
    """Index of the module's layer in LAYERS (longest matching prefix); -1 outside them."""
    best, index = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    return index


def part_of(module: str) -> str:
    """The package under elical ("elical.annotate.pipeline" -> "annotate")."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else pieces[0]


def _elical_caller(frame: FrameType | None) -> str | None:
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("elical"):
            return name
        frame = frame.f_back
    return None


def trace(config: Any, out: Path) -> list[tuple[str, str]]:
    """(caller module, callee module) of every call into an elical function while the run runs."""
    from elical.run.pipeline import run_pipeline

    calls: list[tuple[str, str]] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("elical"):
            return
        caller = _elical_caller(frame.f_back)
        if caller is not None and caller != callee:
            calls.append((caller, callee))

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run_pipeline(config, out, log=lambda _: None)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return calls


def entries_from(calls: list[tuple[str, str]], callers: tuple[str, ...]) -> dict[str, int]:
    """Per part below the apps layer: separate entries from the ``callers`` modules (consecutive calls count once)."""
    apps = len(LAYERS) - 1
    entries: dict[str, int] = defaultdict(int)
    last = None
    for caller, callee in calls:
        if not caller.startswith(callers):
            continue
        part = part_of(callee)
        if part == "run" or layer_of(callee) in (apps, 0):  # the base layer's values and files are used everywhere
            continue
        if part != last:
            entries[part] += 1
        last = part
    return dict(entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temporary one)")
    args = parser.parse_args()
    from elical.run.config import load_run_config

    config = load_run_config(overrides=TINY)
    with tempfile.TemporaryDirectory() as tmp:
        calls = trace(config, args.out or Path(tmp) / "run")
    modules = sorted({m for pair in calls for m in pair})
    by_layer: dict[str, list[str]] = defaultdict(list)
    for module in modules:
        by_layer[LAYERS[layer_of(module)][0] if layer_of(module) >= 0 else "?"].append(module)
    print(f"tiny world run (benchmarks/same_outputs.py's TINY): {len(calls)} calls between {len(modules)} elical modules")
    for name, _ in LAYERS:
        print(f"  {name}: {len(by_layer[name])} modules")
    upward = Counter((a, b) for a, b in calls if layer_of(b) > layer_of(a))
    print(f"calls from a lower layer into a higher one: {len(upward)} caller/callee pairs, {sum(upward.values())} calls")
    for (caller, callee), count in upward.most_common():
        print(f"  {caller} ({LAYERS[layer_of(caller)][0]}) -> {callee} ({LAYERS[layer_of(callee)][0]}): {count}")
    for label, callers in (("elical.run (any module)", ("elical.run",)),
                           ("the step loop (run.pipeline, run.steps.sequence)", ("elical.run.pipeline", "elical.run.steps.sequence"))):
        entries = entries_from(calls, callers)
        print(f"entries from {label} into each part (consecutive calls count once): "
              + ", ".join(f"{part} {n}" for part, n in sorted(entries.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
