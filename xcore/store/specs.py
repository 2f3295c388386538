"""Shared job specs: each distinct executor and executable JSON is stored once, in ``job_specs``.

A sweep's 10,000 jobs share one executor and one executable. Stored in every job row they made
each row about 1 KB, so recording the sweep and marking it launched rewrote some 10 MB of pages
(issue 14). Since schema version 5 a job row holds two small ids (``executor_spec``,
``executable_spec``) and ``job_specs(id, digest, body)`` holds each distinct text once, found by
its SHA-256 ``digest`` (a unique index on the digest, not on the text: a PostgreSQL B-tree entry
must stay under about 2.7 KB, and an executor can be bigger).

Writers ask a ``SpecIds`` of their transaction for the id of each spec: it encodes each distinct
object once and looks each distinct text up once, inserting it when new. The insert skips a
digest already present (``ON CONFLICT DO NOTHING``) and then reads the id, so two launchers
recording the same new spec at once on PostgreSQL both end up with the one row. Readers join the
bodies back in (``select_jobs``) and get exactly the text the job was recorded with.
Specs are never deleted: a spec row is small, and many jobs of many experiments share it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence

# The two job columns that name a spec, and the columns readers get in their place.
SPEC_COLUMNS = {"executor": "executor_spec", "executable": "executable_spec"}

_JOINS = (" JOIN job_specs xs ON xs.id = jobs.executor_spec"
          " JOIN job_specs ys ON ys.id = jobs.executable_spec")
_READ_AS = {"executor": "xs.body AS executor", "executable": "ys.body AS executable"}


def digest(body: str) -> str:
    """The key a spec is found by: SHA-256 of its UTF-8 text, in hex (PostgreSQL computes the
    same with ``encode(sha256(convert_to(body, 'UTF8')), 'hex')``)."""
    return hashlib.sha256(body.encode()).hexdigest()


def insert_sql(mark: str) -> str:
    """Record a spec unless its digest is present (``mark`` is the driver's placeholder)."""
    return f"INSERT INTO job_specs (digest, body) VALUES ({mark}, {mark}) ON CONFLICT (digest) DO NOTHING"


def select_sql(mark: str) -> str:
    return f"SELECT id FROM job_specs WHERE digest = {mark}"


def select_jobs(columns: Sequence[str]) -> str:
    """``SELECT <columns> FROM jobs`` with the specs joined in: ``executor`` and ``executable``
    read as the stored JSON text, as they were before version 5. Other columns are the job's
    (qualify them as ``jobs.<column>`` in a WHERE or ORDER BY that names ``id``)."""
    listed = ", ".join(_READ_AS.get(c, f"jobs.{c}") for c in columns)
    return f"SELECT {listed} FROM jobs{_JOINS}"


class SpecIds:
    """The spec ids of one transaction. ``store_one(digest, body)`` records a spec if new and
    returns its id (a store's two statements: ``insert_sql`` then ``select_sql``); it is called
    once per distinct text not in ``known``, and ``json.dumps`` once per distinct spec object."""

    def __init__(self, store_one: Callable[[str, str], int], known: Mapping[str, int] | None = None) -> None:
        self._store_one = store_one
        self._known = known or {}
        self.used: dict[str, int] = {}  # text -> id, every spec this transaction named
        self._by_object: dict[int, tuple[object, int]] = {}  # id(spec) -> (spec, spec id): holds spec

    def of(self, spec: object) -> int:
        """The id of a spec (a JSON value), by identity first: a sweep's jobs share one object."""
        hit = self._by_object.get(id(spec))
        if hit is None or hit[0] is not spec:
            body = json.dumps(spec)
            # named in this transaction, known to the store object, or recorded now (ids are never 0)
            self.used[body] = self.used.get(body) or self._known.get(body) or self._store_one(digest(body), body)
            hit = self._by_object[id(spec)] = (spec, self.used[body])
        return hit[1]


class KnownSpecs:
    """Spec ids a store object has seen committed, kept across its transactions: a launcher's
    40 group commits of one sweep look its executor up once, not 40 times (a round trip each on
    PostgreSQL). Safe because a spec row, once committed, never changes or goes away. A store
    calls ``begin`` in each transaction that names specs, and ``committed`` or ``discarded``
    when that transaction ends; what a rolled-back transaction found is never kept."""

    def __init__(self, limit: int = 1024) -> None:
        self._ids: dict[str, int] = {}
        self._pending: list[SpecIds] = []
        self._limit = limit

    def begin(self, store_one: Callable[[str, str], int]) -> SpecIds:
        ids = SpecIds(store_one, self._ids)
        self._pending.append(ids)
        return ids

    def committed(self) -> None:
        for ids in self._pending:
            if len(self._ids) + len(ids.used) > self._limit:  # e.g. a long copy of many experiments
                self._ids.clear()
            self._ids.update(ids.used)
        self._pending.clear()

    def discarded(self) -> None:
        self._pending.clear()
