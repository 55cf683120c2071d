"""Stage 2, describe: one VLM request per figure, as leased work items over the workspace.

A work item is a finished document with figures (its ``FigureDocument``); its lease lets
several ``ocrflow describe`` processes share one OUT. Each figure's answer is written the
moment it arrives (``stages.figure_items``), so a killed describe loses only the requests
in flight, and a rerun skips every figure that has a result: a second describe of a
finished OUT sends nothing. Requests go through the run's engine layer (``open_engine``:
replicas, adaptive backpressure, managed vLLM) and ``FigureAsker``'s classified retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from ocrflow.config import EngineOptions
from ocrflow.errors import ConfigError
from ocrflow.readers.session import open_engine
from ocrflow.sinks.figure_records import (
    FigureDocument,
    FigureEntry,
    figure_doc_ids,
    load_figure_document,
)
from ocrflow.stages.answers import prompt_for
from ocrflow.stages.asker import AskSettings, FigureAsker
from ocrflow.stages.figure_items import (
    DescribeSet,
    FigureResult,
    result_key,
    result_prefix,
    save_latest,
)
from ocrflow.storage.local import Store
from ocrflow.workspace.leases import Lease, LeaseManager, new_owner
from ocrflow.workspace.state import Workspace, store_call

log = logging.getLogger("ocrflow.describe")
#: Figures whose crops are held and asked about at once, per server (bounds memory; well
#: above what a server batches, so the engine's own limiter decides the pace).
FIGURES_PER_SERVER = 512
DOCUMENTS_AT_ONCE = 64
IDLE_POLL_S = 1.0


@dataclass(frozen=True)
class DescribeConfig:
    """What ``ocrflow describe`` was asked to do."""

    output: str
    engine: EngineOptions
    task: str = "caption"
    prompt: str | None = None
    #: Describe only figures with these labels (empty: every figure).
    labels: tuple[str, ...] = ()
    max_tokens: int = 1024
    lease_ttl_s: float = 120.0

    def describe_set(self) -> DescribeSet:
        if self.engine.kind not in {"openai", "vllm"}:
            raise ConfigError("describe needs a VLM: --engine openai (with --server) or vllm")
        if not self.engine.model:
            raise ConfigError("describe needs --model (or an OUT made with one)")
        try:
            prompt = prompt_for(self.task, self.prompt)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return DescribeSet(task=self.task, prompt=prompt, model=self.engine.model)


@dataclass
class DescribeStats:
    """What one describe run did."""

    figures: int = 0
    described: int = 0
    already: int = 0
    failed: int = 0
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def record(self) -> dict[str, object]:
        data = {k: v for k, v in self.__dict__.items() if k != "errors"}
        rate = self.described / self.elapsed_s if self.elapsed_s else 0.0
        return data | {"figures_per_s": round(rate, 3), "errors": self.errors[:10]}


async def describe(config: DescribeConfig, workspace: Workspace) -> DescribeStats:
    """Describe every wanted figure of OUT that has no result yet; return what was done."""
    settings = config.describe_set()
    started, cpu = time.monotonic(), time.process_time()
    stats = DescribeStats()
    async with open_engine(config.engine, log_dir=workspace.log_dir()) as session:
        await store_call(save_latest, workspace.store, settings)
        asker = FigureAsker(
            session.engine,
            AskSettings(
                settings.task,
                settings.prompt,
                max_tokens=config.max_tokens,
                deadline_s=config.engine.page_deadline_s,
                request_timeout_s=config.engine.request_timeout_s,
            ),
        )
        servers = max(1, len(getattr(session.engine, "replicas", ())))
        runner = DescribeRunner(workspace.store, settings, config, asker, stats, servers)
        await runner.run()
    stats.elapsed_s = round(time.monotonic() - started, 3)
    stats.cpu_s = round(time.process_time() - cpu, 3)
    return stats


class DescribeRunner:
    """Claims documents, asks about their figures, writes each answer as it comes."""

    def __init__(
        self,
        store: Store,
        settings: DescribeSet,
        config: DescribeConfig,
        asker: FigureAsker,
        stats: DescribeStats,
        servers: int = 1,
    ) -> None:
        self.store = store
        self.set_id = settings.fingerprint
        self.labels = set(config.labels)
        self.asker = asker
        self.stats = stats
        self.leases = LeaseManager(store, new_owner(), ttl_s=config.lease_ttl_s)
        self.figure_slots = asyncio.Semaphore(FIGURES_PER_SERVER * servers)
        self.document_slots = asyncio.Semaphore(DOCUMENTS_AT_ONCE)
        self._counted: set[str] = set()
        #: Result keys of figures that failed in this run: the next run tries them again,
        #: this one does not (it would loop on a figure the server always refuses).
        self._given_up: set[str] = set()

    async def run(self) -> None:
        """Pass over the documents until none has a figure left to describe."""
        while True:
            pending = await store_call(self.pending)
            if not pending:
                return
            if not await self._pass(pending):  # all leased by other workers: wait
                await asyncio.sleep(IDLE_POLL_S)

    def pending(self) -> list[FigureDocument]:
        """Finished documents with a wanted figure that has no answer yet."""
        done_docs = Workspace(self.store).done_ids()
        answered = set(self.store.list(result_prefix(self.set_id)))
        found = []
        for doc_id in figure_doc_ids(self.store):
            if doc_id not in done_docs:
                continue
            record = load_figure_document(self.store, doc_id)
            if record is None:
                continue
            todo = self._todo(record, answered)
            self._count(record, todo)
            if todo:
                found.append(record)
        return found

    def _wanted(self, record: FigureDocument) -> list[FigureEntry]:
        return [f for f in record.figures if not self.labels or f.label in self.labels]

    def _todo(self, record: FigureDocument, answered: set[str]) -> list[FigureEntry]:
        skip = answered | self._given_up
        return [f for f in self._wanted(record) if self._key(record.doc_id, f) not in skip]

    def _key(self, doc_id: str, figure: FigureEntry) -> str:
        return result_key(self.set_id, doc_id, figure.page, figure.index)

    def _count(self, record: FigureDocument, todo: list[FigureEntry]) -> None:
        if record.doc_id not in self._counted:  # the first look at a document counts it
            self._counted.add(record.doc_id)
            wanted = len(self._wanted(record))
            self.stats.figures += wanted
            self.stats.already += wanted - len(todo)

    async def _pass(self, documents: list[FigureDocument]) -> int:
        claimed = 0
        async with asyncio.TaskGroup() as group:
            for record in documents:
                await self.document_slots.acquire()
                item = f"describe-{self.set_id}-{record.doc_id}"
                lease = await store_call(self.leases.claim, item)
                if lease is None:
                    self.document_slots.release()
                    continue
                claimed += 1
                group.create_task(self._document(record, lease))
        return claimed

    async def _document(self, record: FigureDocument, lease: Lease) -> None:
        try:
            async with self.leases.held(lease):
                # Listed again under the lease: another worker may have finished some.
                prefix = result_prefix(self.set_id, record.doc_id)
                todo = self._todo(record, set(await store_call(self.store.list, prefix)))
                await asyncio.gather(*(self._figure(record.doc_id, f) for f in todo))
            await store_call(self.leases.release, lease)
        except asyncio.CancelledError:
            if not lease.lost:
                raise
            log.warning("lease of %s lost: another worker goes on with it", record.doc_id)
        finally:
            self.document_slots.release()

    async def _figure(self, doc_id: str, figure: FigureEntry) -> None:
        async with self.figure_slots:
            png = await store_call(self.store.read_bytes, figure.path)
            if png is None:
                self._given_up.add(self._key(doc_id, figure))
                self._failed(f"{doc_id}: crop {figure.path} is missing")
                return
            result = await self.asker.ask(doc_id, figure.page, figure.index, png)
        self.stats.attempts += max(result.attempts, 1)
        self.stats.tokens_in += result.tokens_in
        self.stats.tokens_out += result.tokens_out
        if result.status != "ok":
            # Kept apart from answers, so a rerun asks again (a failure is not an answer).
            await store_call(self._save, result, ".failed.json")
            self._given_up.add(self._key(doc_id, figure))
            self._failed(f"{doc_id} p{figure.page}-{figure.index}: {result.error}")
            return
        await store_call(self._save, result, ".json")
        self.stats.described += 1

    def _save(self, result: FigureResult, suffix: str) -> None:
        key = result_key(self.set_id, result.doc_id, result.page, result.index)
        self.store.write_bytes(key.removesuffix(".json") + suffix, result.dump())
        if suffix == ".json":  # an earlier run's failure is superseded
            self.store.delete(key.removesuffix(".json") + ".failed.json")

    def _failed(self, message: str) -> None:
        self.stats.failed += 1
        self.stats.errors.append(message)
        log.warning("figure not described: %s", message)
