"""The job database (SQLAlchemy): SQLite by default, PostgreSQL by URL; Alembic migrates it.

It holds jobs, their owners (token hashes, never tokens), options and progress. Documents
and pages stay in each job's workspace; ``rebuild`` re-creates missing rows from the job
folders, so a lost database costs nothing but the callbacks already sent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    JSON,
    Float,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from ocrflow.errors import require

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
TERMINAL = ("done", "failed", "cancelled")


class Base(DeclarativeBase):
    """Declarative base of the service's tables."""


class Job(Base):
    """One job: a run into ``ROOT/jobs/<id>/out`` and what the API reports about it."""

    __tablename__ = "jobs"
    __table_args__ = (UniqueConstraint("owner", "idempotency_key", name="uq_jobs_owner_key"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64), index=True, default="")
    status: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    callback_url: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: none | pending | sent | failed
    callback_state: Mapped[str] = mapped_column(String(16), default="none")
    documents: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)
    pages_done: Mapped[int] = mapped_column(Integer, default=0)
    pages_total: Mapped[int] = mapped_column(Integer, default=0)
    failures: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    created: Mapped[float] = mapped_column(Float, index=True)
    started: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished: Mapped[float | None] = mapped_column(Float, nullable=True)


def default_url(root: str | Path) -> str:
    """The SQLite file used when no ``--db`` is given."""
    return f"sqlite:///{Path(root).resolve() / 'ocrflow.db'}"


def connect(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL and a busy timeout (API and workers share it)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    if url.startswith("postgresql+psycopg"):
        require("psycopg", extra="postgres", feature="--db postgresql://…")
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    return engine


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (at every start)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


class Database:
    """Sessions on one engine."""

    def __init__(self, url: str) -> None:
        self.engine = connect(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def migrate(self) -> None:
        """Run the migrations."""
        migrate(self.engine)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block (rolled back on error)."""
        with self._sessions.begin() as session:
            yield session

    def active_ids(self) -> list[str]:
        """Ids of jobs not in a final state."""
        with self.session() as session:
            rows = session.scalars(select(Job.id).where(Job.status.not_in(TERMINAL)))
            return list(rows)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
