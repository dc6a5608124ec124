"""The `elical` command line: one thin command per pipeline step, plus `run` for the whole job.

The app is built in :mod:`elical.cli.common`; each command group's module adds its commands to it on import,
so the imports below are in the order of `elical --help`. Every command imports its library code when it
runs, so `elical --help` stays fast.
"""

# isort: skip_file
from elical.cli.common import app
from elical.cli import evaluate_cmds  # evaluate
from elical.cli import annotate_cmds  # annotate, annotate-merge, judge-check, label-audit
from elical.cli import honesty_cmds  # honesty-tune, honesty-eval
from elical.cli import train_cmds  # train, predict, select-labels, gate
from elical.cli import serve_cmds  # serve
from elical.cli import run_cmds  # run, retrieve-eval
from elical.cli import world_cmds  # world generate, world train-lm

COMMAND_GROUPS = (evaluate_cmds, annotate_cmds, honesty_cmds, train_cmds, serve_cmds, run_cmds, world_cmds)
__all__ = ["COMMAND_GROUPS", "app"]

if __name__ == "__main__":
    app()
