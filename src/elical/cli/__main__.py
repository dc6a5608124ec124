"""`python -m elical.cli ...`: the `elical` command."""

from elical.cli.main import app

app()
