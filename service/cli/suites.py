"""``roofwatch repo set-suites`` (and ``repo add --suites``): suites kept outside the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from sqlmodel import Session, select

from roofwatch.service.core.models import Repository
from roofwatch.service.records.suite_configs import store

console = Console()
err = Console(stderr=True)


def set_suites(session: Session, repository: Repository, path: Path, out: Console) -> None:
    config = store(session, repository, path.read_text(encoding="utf-8"), path.name)
    out.print(f"{escape(repository.full_name)}: suites v{config.version} from {escape(path.name)} stored")


def set_suites_command(
    full_name: Annotated[str, typer.Argument(help="registered OWNER/NAME")],
    file: Annotated[Path, typer.Argument(help="TOML with [[tool.roofwatch.suites]] tables")],
) -> None:
    """Keep (a new version of) the repository's suites in roofwatch; every version is kept."""
    from roofwatch.common.errors import RoofwatchError
    from roofwatch.service.cli.database import prepare_database
    from roofwatch.service.core.db import session_scope

    prepare_database()
    try:
        with session_scope() as session:
            repository = session.exec(select(Repository).where(Repository.full_name == full_name)).first()
            if repository is None:
                raise RoofwatchError(f"{full_name!r} is not registered (`roofwatch repo add` first)")
            set_suites(session, repository, file, console)
    except (RoofwatchError, OSError) as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
