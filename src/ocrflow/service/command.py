"""``ocrflow serve`` and ``ocrflow worker --root``: the Typer commands of the job service."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from ocrflow.config import EngineOptions, RenderOptions, RunConfig, ScaleOptions
from ocrflow.errors import OcrflowError
from ocrflow.metrics import Metrics

from .auth import TokenSet, check_bind

if TYPE_CHECKING:
    from .jobs import JobStore
    from .requests import RequestLimits
    from .scheduler import SchedulerSettings

ENGINE = "Engine (as ocrflow run)"
log = logging.getLogger("ocrflow.service")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _key_values(pairs: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise _fail(f"expected KEY=VALUE, got {pair!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except ValueError:
            values[key.strip()] = raw
    return values


def serve_command(
    root: Annotated[Path, typer.Option(help="Folder holding every job (ROOT/jobs/<id>).")],
    db: Annotated[
        str | None,
        typer.Option(help="Database URL (default: SQLite ROOT/ocrflow.db), e.g. postgresql://…"),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    workers: Annotated[int, typer.Option(help="In-process workers (0: only remote ones).")] = 1,
    token_file: Annotated[
        Path | None, typer.Option(help="API tokens, one a line (also OCRFLOW_API_TOKENS).")
    ] = None,
    max_upload_mb: Annotated[int, typer.Option(help="Largest upload per job, MB.")] = 100,
    allow_uri_prefix: Annotated[
        list[str] | None, typer.Option(help="URI/path prefix jobs may read (repeatable).")
    ] = None,
    allow_callback_host: Annotated[
        list[str] | None, typer.Option(help="Host a callback_url may name (repeatable).")
    ] = None,
    engine: Annotated[
        str, typer.Option(help="embedded, tesseract, openai, vllm.", rich_help_panel=ENGINE)
    ] = "embedded",
    model: Annotated[str | None, typer.Option(rich_help_panel=ENGINE)] = None,
    server: Annotated[list[str] | None, typer.Option(rich_help_panel=ENGINE)] = None,
    api_key: Annotated[
        str | None,
        typer.Option(help="(or OPENAI_API_KEY)", rich_help_panel=ENGINE, show_default=False),
    ] = None,
    recipe: Annotated[str | None, typer.Option(rich_help_panel=ENGINE)] = None,
    recipe_option: Annotated[list[str] | None, typer.Option(rich_help_panel=ENGINE)] = None,
    served_model_name: Annotated[str | None, typer.Option(rich_help_panel=ENGINE)] = None,
    max_concurrency: Annotated[int | None, typer.Option(rich_help_panel=ENGINE)] = None,
    request_timeout: Annotated[float, typer.Option(rich_help_panel=ENGINE)] = 180.0,
    page_deadline: Annotated[float, typer.Option(rich_help_panel=ENGINE)] = 600.0,
    parallel: Annotated[int | None, typer.Option(rich_help_panel=ENGINE)] = None,
    threads: Annotated[int | None, typer.Option(rich_help_panel=ENGINE)] = None,
    render_workers: Annotated[int, typer.Option(help="Render processes per worker.")] = 1,
    split_pages: Annotated[int, typer.Option(help="Split documents into items of N pages.")] = 50,
    lease_ttl: Annotated[float, typer.Option(help="Seconds a lease lasts unrenewed.")] = 60.0,
    items_in_flight: Annotated[
        int, typer.Option(help="Documents (or page ranges) each worker converts at once.")
    ] = 4,
    quiet: Annotated[bool, typer.Option("-q", "--quiet")] = False,
) -> None:
    """Serve the job API (POST /v1/jobs …, docs at /docs) with in-process workers."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")  # fmt: skip
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # The service's modules load here, not when ``ocrflow`` starts (SQLAlchemy, Alembic).
    from .db import Database, default_url
    from .jobs import JobStore, ServiceSettings
    from .requests import RequestLimits
    from .scheduler import SchedulerSettings

    root = root.resolve()
    try:
        tokens = TokenSet.load(token_file)
        check_bind(host, tokens)
        base = RunConfig(
            inputs=(),
            output=str(root),
            render=RenderOptions(workers=render_workers),
            engine=EngineOptions(
                kind=engine,  # type: ignore[arg-type]
                model=model,
                servers=tuple(server or ()),
                recipe=recipe,
                recipe_options=_key_values(recipe_option or []),
                served_model_name=served_model_name,
                max_concurrency=max_concurrency,
                request_timeout_s=request_timeout,
                page_deadline_s=page_deadline,
                threads=threads,
                **({"parallel": parallel} if parallel else {}),
            ),
            scale=ScaleOptions(split_pages=split_pages, lease_ttl_s=lease_ttl),
        )
        (root / "jobs").mkdir(parents=True, exist_ok=True)
        database = Database(db or default_url(root))
        database.migrate()
    except ValidationError as exc:
        raise _fail(f"invalid option: {exc.errors()[0]['msg']}") from None
    except (OcrflowError, OSError) as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # a database that cannot be reached or migrated
        raise _fail(f"database: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    jobs = JobStore(database, ServiceSettings(root=root, base=base))
    added = jobs.rebuild()
    if added:
        log.info("rebuilt %d jobs from %s", added, root / "jobs")
    key = _engine_key(api_key)
    _run_uvicorn(jobs, tokens, host, port, quiet, limits=RequestLimits(
        max_upload_bytes=max_upload_mb << 20,
        uri_prefixes=tuple(allow_uri_prefix or ()),
        callback_hosts=tuple(allow_callback_host or ()),
    ), scheduler=SchedulerSettings(
        root=root, slots=workers, api_key=key, servers=tuple(server or ()),
        render_workers=render_workers, lease_ttl_s=lease_ttl, metrics=Metrics(),
        items_in_flight=items_in_flight,
    ))  # fmt: skip


def _run_uvicorn(
    jobs: JobStore,
    tokens: TokenSet,
    host: str,
    port: int,
    quiet: bool,
    *,
    limits: RequestLimits,
    scheduler: SchedulerSettings,
) -> None:
    import uvicorn

    from .app import Service, create_app

    app = create_app(Service(jobs, tokens, limits, scheduler))
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning" if quiet else "info")
    finally:
        jobs.db.close()


async def work_root(
    root: Path,
    slots: int,
    api_key: str | None,
    servers: list[str] | tuple[str, ...],
    render_workers: int | None,
    lease_ttl: float | None,
    exit_when_idle: bool,
) -> None:
    """``ocrflow worker --root ROOT``: work on the queued jobs of a service root."""
    from .scheduler import Scheduler, SchedulerSettings

    settings = SchedulerSettings(
        root=root.resolve(),
        slots=slots,
        api_key=_engine_key(api_key),
        servers=tuple(servers),
        render_workers=render_workers or 1,
        lease_ttl_s=lease_ttl or 60.0,
        exit_when_idle=exit_when_idle,
    )
    await Scheduler(settings).run()


def _engine_key(api_key: str | None) -> str | None:
    return api_key or os.environ.get("OPENAI_API_KEY") or os.environ.get("OCRFLOW_API_KEY")
