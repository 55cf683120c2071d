"""How a worker sets up the pipeline for its engine: the page reader (plain, or a recipe's
with retries, fallbacks and second passes), the render size, the page budget, and the
progress events fanned out to every listener."""

from __future__ import annotations

from ocrflow.config import EngineOptions, RunConfig
from ocrflow.engines.factory import build_engine
from ocrflow.inputs.source import Source
from ocrflow.pipeline.documents import CHUNK_PAGES, DocumentPipeline, PageBudget, Progress
from ocrflow.readers.markdown_clean import recipe_prompts
from ocrflow.readers.plain import PageReader, PlainReader
from ocrflow.readers.session import EngineSession
from ocrflow.render.pool import RenderPool
from ocrflow.render.resolution import Resolution
from ocrflow.sinks import Outputs
from ocrflow.types import DocumentResult, PageResult
from ocrflow.workspace.state import Workspace


class FanOut:
    """Sends progress events to several listeners."""

    def __init__(self, *listeners: Progress) -> None:
        self.listeners = listeners

    def document_started(self, source: Source, pages: int) -> None:
        for listener in self.listeners:
            listener.document_started(source, pages)

    def pages_finished(self, results: list[PageResult]) -> None:
        for listener in self.listeners:
            listener.pages_finished(results)

    def document_finished(self, source: Source, result: DocumentResult, skipped: bool) -> None:
        for listener in self.listeners:
            listener.document_finished(source, result, skipped)


def build_reader(
    config: RunConfig, session: EngineSession, workspace: Workspace | None = None
) -> PageReader:
    """The page reader for the engine: plain text, or a recipe with retries and fallbacks.
    With a ``workspace``, a multi-step recipe's finished steps are checkpointed there, so a
    resumed run does not ask them again."""
    if session.recipe is None:
        return PlainReader(session.engine)
    from ocrflow.readers.policy import AttemptPolicy, TransportPolicy
    from ocrflow.readers.second_pass import second_pass_for
    from ocrflow.readers.vlm import VlmReader

    options, passes = config.engine, config.passes
    second_pass = second_pass_for(
        session.recipe, passes.roi_labels, passes.retry_large_cap, passes.required_labels
    )
    return VlmReader(
        session.engine,
        session.recipe,
        transport=TransportPolicy(
            page_deadline_s=options.page_deadline_s, request_timeout_s=options.request_timeout_s
        ),
        attempts=AttemptPolicy(max_page_error_rate=options.max_page_error_rate),
        fallback_engine=lambda: build_engine(EngineOptions(kind="embedded")),
        second_pass=second_pass,
        first_pass_dim=page_dim(config, session) if second_pass else None,
        steps=workspace,
    )


def page_dim(config: RunConfig, session: EngineSession) -> int:
    """The longest side of the image the engine's first read gets."""
    return config.render.target_dim or session.target_dim


def render_dim(config: RunConfig, session: EngineSession) -> int:
    """The longest side pages are rendered at: the first read's, or the second passes'
    resolution when they are on (the reader shrinks the page for its first read)."""
    passes = config.passes
    if session.recipe is not None and (passes.roi_labels or passes.retry_large_cap):
        from ocrflow.readers.second_pass import HIRES_DIM

        return max(page_dim(config, session), HIRES_DIM)
    return page_dim(config, session)


#: Pages in flight per replica that an adaptive limit may use. Measured on one H100 with
#: olmOCR-2 (fp8 KV cache): vLLM's batch held ~350 requests; a budget of 256 capped ocrflow
#: below that (0.84-0.91 of a bare client). A page costs ~0.1-0.3 MB while it waits.
ADAPTIVE_PAGES_PER_REPLICA = 512


def render_resolution(config: RunConfig, session: EngineSession) -> Resolution:
    """The size pages are rendered at: ``--target-dim`` or ``--dpi`` when given, else the
    engine's resolution (a CPU engine), else its recipe's pixel target (a VLM)."""
    render = config.render
    if render.target_dim is None and render.dpi is not None:
        return Resolution(render_dim(config, session), dpi=render.dpi)
    if render.target_dim is None and session.recipe is None and session.dpi is not None:
        return Resolution(session.target_dim, dpi=session.dpi, max_scan_dpi=session.max_scan_dpi)
    return Resolution(render_dim(config, session))


def page_budget(config: RunConfig) -> int:
    """How many pages may be rendered and not yet read: enough to keep the engine busy."""
    render_ahead = CHUNK_PAGES * config.render.workers * 2
    if config.engine.kind in {"embedded", "tesseract"}:
        # A chunk a render worker, and what the engine reads at once besides: the CPU
        # engines read pages at their own resolution, up to 46 MB of pixels an A4 page at
        # 400 dpi, and twice that budget held a 30-page scan's run at 2.1 GB.
        return max(CHUNK_PAGES * config.render.workers, 2 * config.engine.parallel + CHUNK_PAGES)
    replicas = max(1, len(config.engine.servers), len(config.engine.gpus))
    concurrency = config.engine.max_concurrency or ADAPTIVE_PAGES_PER_REPLICA
    return render_ahead + concurrency * replicas + CHUNK_PAGES * 4


def build_pipeline(
    config: RunConfig,
    workspace: Workspace,
    session: EngineSession,
    reader: PageReader,
    *,
    pool: RenderPool,
    listeners: list[Progress],
    owner: str,
    fingerprint: str,
) -> DocumentPipeline:
    """The document pipeline of one worker: its outputs, page budget and render size, and
    progress events sent to every listener (the first is the worker's own tally)."""
    return DocumentPipeline(
        pages=config.pages,
        passwords=config.passwords,
        render=config.render,
        route=config.route,
        passes=config.passes,
        out=config.out,
        max_page_error_rate=config.engine.max_page_error_rate,
        pool=pool,
        reader=reader,
        workspace=workspace,
        outputs=Outputs(config.out, workspace.store, owner),
        budget=PageBudget(page_budget(config)),
        progress=FanOut(*listeners) if len(listeners) > 1 else listeners[0],
        fingerprint=fingerprint,
        engine_name=session.label,
        resolution=render_resolution(config, session),
        prompts=recipe_prompts(session.recipe),
    )
