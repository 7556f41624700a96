"""Session memory: the messages of earlier runs, kept in SQLite, put before the next question."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .._errors import UsageError

__all__ = ["Memory"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    session TEXT NOT NULL,
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    created REAL NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_session ON messages (session, seq);
"""


class Memory:
    """What earlier runs of a session said, in a SQLite file: ``Agent(..., memory=Memory(path))``.

    A run starts from the session's messages (its questions, calls, results and answers, oldest
    first) followed by the new question, and adds its own when it ends with an answer. The
    context budget leaves the oldest out of a prompt when they no longer fit; they stay here.
    ``max_messages`` keeps only the newest of them in the file (``None``: all).
    """

    def __init__(self, path: str | Path, *, session: str = "default", max_messages: int | None = None) -> None:
        if max_messages is not None and max_messages < 1:
            raise UsageError(f"Memory(max_messages=...) must be at least 1, got {max_messages}")
        self.path = Path(path)
        self.session = session
        self.max_messages = max_messages
        self._lock = threading.Lock()
        with self._connect() as db:
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def messages(self) -> list[dict[str, Any]]:
        """The session's messages, oldest first."""
        with self._lock, self._connect() as db:
            rows = db.execute("SELECT message FROM messages WHERE session = ? ORDER BY seq", (self.session,)).fetchall()
        return [json.loads(text) for (text,) in rows]

    def add(self, run_id: str, messages: list[dict[str, Any]]) -> None:
        """Append a run's messages (whole turns: a question and what answered it)."""
        now = time.time()
        with self._lock, self._connect() as db:
            db.executemany("INSERT INTO messages (session, run_id, created, message) VALUES (?, ?, ?, ?)",
                           [(self.session, run_id, now, json.dumps(m, ensure_ascii=False)) for m in messages])
            if self.max_messages is not None:
                self._trim(db)

    def _trim(self, db: sqlite3.Connection) -> None:
        # Whole turns only: the cut moves forward to a user message, so no result loses its call.
        rows = db.execute("SELECT seq, message FROM messages WHERE session = ? ORDER BY seq DESC",
                          (self.session,)).fetchall()
        if len(rows) <= (self.max_messages or 0):
            return
        keep = rows[: self.max_messages][::-1]
        first = next((seq for seq, text in keep if json.loads(text).get("role") == "user"), None)
        cutoff = first if first is not None else keep[-1][0] + 1
        db.execute("DELETE FROM messages WHERE session = ? AND seq < ?", (self.session, cutoff))

    def clear(self) -> None:
        """Forget the session."""
        with self._lock, self._connect() as db:
            db.execute("DELETE FROM messages WHERE session = ?", (self.session,))
