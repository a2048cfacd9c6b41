"""``python -m pgdyno``: the same as the ``pgdyno`` command."""

from pgdyno.cli.main import run

run()
