"""``roofwatch repo set-suites`` (and ``repo add --suites``): suites kept outside the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from roofwatch.service.core.models import SuiteConfig

console = Console()
err = Console(stderr=True)


def say_stored(out: Console, full_name: str, config: SuiteConfig) -> None:
    out.print(f"{escape(full_name)}: suites v{config.version} from {escape(config.origin)} stored")


def set_suites_command(
    full_name: Annotated[str, typer.Argument(help="registered OWNER/NAME")],
    file: Annotated[Path, typer.Argument(help="TOML with [[tool.roofwatch.suites]] tables")],
) -> None:
    """Keep (a new version of) the repository's suites in roofwatch; every version is kept."""
    from roofwatch.common.errors import RoofwatchError
    from roofwatch.service.cli.database import prepare_database
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        config = maintenance.set_suites(full_name, file)
    except (RoofwatchError, OSError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    say_stored(console, full_name, config)
