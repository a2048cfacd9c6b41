"""`pgdyno detect` and `pgdyno tune` (the configuration engine's commands)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the configuration commands to the main app."""
