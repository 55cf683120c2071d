"""``ocrflow serve`` and ``ocrflow worker --root``: the Typer commands of the job service."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from ocrflow.config import RunConfig
from ocrflow.config.builder import build_run_config
from ocrflow.errors import OcrflowError, require
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, uvicorn_log_level, verbosity
from ocrflow.observe.metrics import Metrics

from .auth import TOKENS_VARIABLE, TokenSet, check_bind

if TYPE_CHECKING:
    from .connections import ConnectionLimits
    from .jobs import JobStore
    from .requests import RequestLimits
    from .scheduler import SchedulerSettings

ENGINE = "Engine (as ocrflow run)"
QUOTA = "Quotas (per token; 0: no limit)"
log = logging.getLogger("ocrflow.service")
#: What ``ocrflow serve`` imports beyond the core install (``pip install 'ocrflow[serve]'``).
SERVE_MODULES = (
    "fastapi", "fastapi_offline", "uvicorn", "sqlalchemy", "alembic", "python_multipart",
)  # fmt: skip


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _engine(help: str | None = None, **settings: Any) -> Any:
    """A flag of the engine panel (``ocrflow run``'s flags, which the service passes on)."""
    return typer.Option(help=help, rich_help_panel=ENGINE, **settings)


def _quota(help: str, *, minimum: int = 0) -> Any:
    """A per-token quota flag (a count, at least ``minimum``)."""
    return typer.Option(help=help, min=minimum, rich_help_panel=QUOTA)


def serve_command(
    root: Annotated[Path, typer.Option(help="Folder holding every job (ROOT/jobs/<id>).")],
    db: Annotated[
        str | None,
        typer.Option(help="Database URL (default: SQLite ROOT/ocrflow.db), e.g. postgresql://…"),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8080,
    header_timeout: Annotated[
        float, typer.Option(help="Seconds a client may take to send a request's head.", min=1)
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(help="Seconds a body may be silent (or under 1 KB/s).", min=1),
    ] = 20.0,
    max_connections: Annotated[
        int, typer.Option(help="Open connections at most (more get 429).", min=1)
    ] = 1000,
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
    allow_model: Annotated[
        list[str] | None, _engine("A model jobs may choose besides --model (repeatable).")
    ] = None,
    engine: Annotated[str | None, _engine("embedded (default), tesseract, openai, vllm.")] = None,
    model: Annotated[str | None, _engine()] = None,
    server: Annotated[list[str] | None, _engine()] = None,
    api_key: Annotated[
        str | None, _engine("(or OCRFLOW_API_KEY, OPENAI_API_KEY)", show_default=False)
    ] = None,
    recipe: Annotated[str | None, _engine()] = None,
    recipe_option: Annotated[list[str] | None, _engine()] = None,
    served_model_name: Annotated[str | None, _engine()] = None,
    vllm_command: Annotated[
        str | None, _engine("How to run vLLM (--engine vllm; default: vllm serve).")
    ] = None,
    vllm_arg: Annotated[
        list[str] | None, _engine("Extra `vllm serve` flag(s); never from a job.")
    ] = None,
    max_concurrency: Annotated[int | None, _engine()] = None,
    request_timeout: Annotated[float | None, _engine()] = None,
    page_deadline: Annotated[float | None, _engine()] = None,
    parallel: Annotated[int | None, _engine()] = None,
    threads: Annotated[int | None, _engine()] = None,
    render_workers: Annotated[int, typer.Option(help="Render processes per worker.")] = 1,
    split_pages: Annotated[int, typer.Option(help="Split documents into items of N pages.")] = 50,
    lease_ttl: Annotated[float, typer.Option(help="Seconds a lease lasts unrenewed.")] = 60.0,
    items_in_flight: Annotated[
        int, typer.Option(help="Documents (or page ranges) each worker converts at once.")
    ] = 4,
    max_queued_jobs: Annotated[int, _quota("Unfinished jobs per token (more: 429).")] = 100,
    max_submissions_per_minute: Annotated[
        int, _quota("Jobs a token may submit a minute (more: 429).")
    ] = 60,
    max_documents_per_job: Annotated[
        int, _quota("Documents (files, rows) a job may name (more: 413).")
    ] = 1000,
    max_pages_per_job: Annotated[
        int, _quota("Pages a job may have (past it the job fails: page_limit).")
    ] = 10_000,
    max_pages_per_token: Annotated[int, _quota("Unfinished pages per token (more: 429).")] = 50_000,
    max_previews_per_token: Annotated[
        int, _quota("Page images a token may have rendering at once (more: 429).", minimum=1)
    ] = 1,
    preview_workers: Annotated[int, _quota("Processes rendering page images.", minimum=1)] = 2,
    engine_start_attempts: Annotated[
        int, _engine("Attempts at opening a job's engine before the job fails.", min=1)
    ] = 5,
    engine_start_backoff: Annotated[
        float, _engine("Seconds before the 2nd attempt; doubled each time (max 30).", min=0)
    ] = 2.0,
    unreachable_timeout: Annotated[
        float | None,
        _engine("Seconds an attempt waits for unreachable servers (as ocrflow run).", min=0.1),
    ] = None,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Serve the job API (POST /v1/jobs …, docs at /docs) with in-process workers."""
    level = verbosity(verbose, quiet)
    configure_logging(level)
    # The service's modules load here, not when ``ocrflow`` starts: they are the serve extra's.
    try:
        require(*SERVE_MODULES, extra="serve", feature="ocrflow serve")
    except OcrflowError as exc:
        raise _fail(str(exc)) from None
    from ocrflow.config.access import check_prefixes

    from .connections import ConnectionLimits
    from .db import Database, default_url
    from .jobs import JobStore, ServiceSettings
    from .options import check_service_engine
    from .quotas import QuotaSettings
    from .requests import RequestLimits
    from .scheduler import SchedulerSettings

    # Job files hold other people's documents: owner-only, whatever the shell's umask.
    os.umask(0o077)
    root = root.resolve()
    try:
        tokens = TokenSet.load(token_file)
        check_bind(host, tokens)
        base = _service_config(
            root, workers=render_workers, split_pages=split_pages, lease_ttl=lease_ttl,
            engine=engine, model=model, server=server, recipe=recipe,
            recipe_option=recipe_option, served_model_name=served_model_name,
            vllm_arg=vllm_arg, vllm_command=vllm_command, max_concurrency=max_concurrency,
            request_timeout=request_timeout, page_deadline=page_deadline,
            unreachable_timeout=unreachable_timeout, threads=threads,
            parallel=parallel or None,  # 0: the default, as before
        )  # fmt: skip
        allowed_models = check_service_engine(base.engine, allow_model or ())
        check_prefixes(tuple(allow_uri_prefix or ()), str(root))  # exit 2: no backend, …
        (root / "jobs").mkdir(parents=True, exist_ok=True)
        database = Database(db or default_url(root))
        database.migrate()
    except ValidationError as exc:
        raise _fail(f"invalid option: {exc.errors()[0]['msg']}") from None
    except (OcrflowError, OSError) as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # a database that cannot be reached or migrated
        raise _fail(f"database: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    quotas = QuotaSettings(
        max_queued_jobs=max_queued_jobs, max_documents_per_job=max_documents_per_job,
        max_pages_per_job=max_pages_per_job, max_pages_per_token=max_pages_per_token,
        max_submissions_per_minute=max_submissions_per_minute,
        max_previews_per_token=max_previews_per_token, preview_workers=preview_workers,
    )  # fmt: skip
    jobs = JobStore(database, ServiceSettings(
        root=root, base=base, allowed_models=allowed_models, quotas=quotas,
        allow_uri_prefixes=tuple(allow_uri_prefix or ()),
    ))  # fmt: skip
    jobs.purge()  # deleted jobs no worker holds any more (the rest: by the refresh loop)
    added = jobs.rebuild()
    if added:
        log.info("rebuilt %d jobs from %s", added, root / "jobs")
    _run_uvicorn(jobs, tokens, host, port, level, limits=RequestLimits(
        max_upload_bytes=max_upload_mb << 20,
        uri_prefixes=tuple(allow_uri_prefix or ()),
        callback_hosts=tuple(allow_callback_host or ()),
    ), scheduler=SchedulerSettings(
        root=root, slots=workers, api_key=api_key, servers=tuple(server or ()),
        render_workers=render_workers, lease_ttl_s=lease_ttl, metrics=Metrics(),
        items_in_flight=items_in_flight, engine_attempts=engine_start_attempts,
        engine_backoff_s=engine_start_backoff,
    ), connection_limits=ConnectionLimits(
        header_timeout_s=header_timeout, max_connections=max_connections,
        body_idle_timeout_s=body_timeout, body_grace_s=body_timeout,
        max_connections_per_client=max(1, max_connections // 5),
    ))  # fmt: skip


def _run_uvicorn(
    jobs: JobStore,
    tokens: TokenSet,
    host: str,
    port: int,
    level: int,
    *,
    limits: RequestLimits,
    scheduler: SchedulerSettings,
    connection_limits: ConnectionLimits | None = None,
) -> None:
    import uvicorn

    from .app import Service, guarded_app
    from .connections import ConnectionLimits, guarded_protocol

    if not tokens.enabled:
        log.warning(
            "authentication is off (no %s or --token-file): anyone who can reach "
            "%s:%d may submit jobs and read every result; only loopback Host names and "
            "same-origin requests are answered", TOKENS_VARIABLE, host, port,
        )  # fmt: skip
    app = guarded_app(Service(jobs, tokens, limits, scheduler))
    try:
        uvicorn.run(
            app, host=host, port=port, log_level=uvicorn_log_level(level),
            http=guarded_protocol(connection_limits or ConnectionLimits()),
            timeout_keep_alive=5, server_header=False,
        )  # fmt: skip
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

    os.umask(0o077)  # as ``serve``: job files are owner-only
    settings = SchedulerSettings(
        root=root.resolve(),
        slots=slots,
        api_key=api_key,
        servers=tuple(servers),
        render_workers=render_workers or 1,
        lease_ttl_s=lease_ttl or 60.0,
        exit_when_idle=exit_when_idle,
    )
    await Scheduler(settings).run()


def _service_config(root: Path, **options: Any) -> RunConfig:
    """The service's run configuration, which every job starts from: ``ocrflow serve``'s
    flags (``ocrflow run``'s names) over the configuration's defaults; the outputs name
    each source by its path in the job (a server's folders are not its clients' business)."""
    config = build_run_config((), root, **options)
    out = config.out.model_copy(update={"relative_source_names": True})
    return config.model_copy(update={"out": out})
