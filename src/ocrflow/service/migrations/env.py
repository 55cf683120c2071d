"""Alembic environment: migrations run on the connection ``ocrflow serve`` hands over."""

from __future__ import annotations

from alembic import context

from ocrflow.service.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()
