"""``ocrflow serve-engine``: vLLM started with a recipe's flags and kept up (restarts
included) until Ctrl-C, for runs on other machines to use with ``--server``."""

from __future__ import annotations

import asyncio
import shlex
from typing import Annotated, Any

import typer

from ocrflow.cli.exits import fail
from ocrflow.config import EngineOptions
from ocrflow.errors import OcrflowError
from ocrflow.executors.plan import run_until_signal
from ocrflow.observe.logs import Quiet, Verbose, configure_logging, verbosity


def serve_engine_command(
    model: Annotated[str, typer.Option(help="Model to serve (HF id or path).")],
    recipe: Annotated[str | None, typer.Option(help="Recipe whose server flags to use.")] = None,
    served_model_name: Annotated[str | None, typer.Option(help="Name clients use.")] = None,
    gpus: Annotated[str | None, typer.Option(help="One replica per GPU, e.g. 0,1.")] = None,
    port: Annotated[int, typer.Option(help="First port (0: any free ports).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    vllm_arg: Annotated[list[str] | None, typer.Option(help="Extra `vllm serve` flags.")] = None,
    vllm_command: Annotated[str, typer.Option(help="How to run vLLM.")] = "vllm serve",
    log_dir: Annotated[str | None, typer.Option(help="Folder for server logs.")] = None,
    ready_timeout: Annotated[float, typer.Option(help="Seconds to wait for readiness.")] = 900.0,
    verbose: Verbose = False,
    quiet: Quiet = False,
) -> None:
    """Start vLLM with a recipe's flags and keep it up (restarts included) until Ctrl-C."""
    configure_logging(verbosity(verbose, quiet))
    from ocrflow.engines.server import ManagedServers, ServerSpec
    from ocrflow.readers.session import api_key
    from ocrflow.recipes.registry import recipe_for_model

    try:
        chosen = recipe_for_model(model, recipe)
        options = EngineOptions(kind="vllm", model=model)
        spec = ServerSpec(
            model=model,
            served_model_name=served_model_name or model,
            flags=(*chosen.server_flags, *(f for a in vllm_arg or () for f in shlex.split(a))),
            gpus=tuple(g for g in (gpus or "").split(",") if g),
            host=host,
            base_port=port,
            command=tuple(shlex.split(vllm_command)),
            log_dir=log_dir,
            ready_timeout_s=ready_timeout,
            api_key=api_key(options),
        )
        run_until_signal(_serve_forever(ManagedServers(spec)))
    except OcrflowError as exc:
        raise fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise typer.Exit(0) from None


async def _serve_forever(servers: Any) -> Any:
    async with servers:
        for url in servers.urls:
            typer.echo(f"serving {url}")
        await asyncio.Event().wait()
