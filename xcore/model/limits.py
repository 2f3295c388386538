"""Size limits on what a launch records (issue 30). Without them a 100 KB title or 10,000 tags
were stored, and every row of ``xcore list`` carried them (158 KB per row); a work unit with
100,000 argument keys made every ``show`` of its experiment slow. Each limit is far above
real use and is checked before anything is recorded; docs/reliability.md lists them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_TITLE_CHARS = 1_000
MAX_TAGS = 100
MAX_TAG_CHARS = 100
MAX_NOTES_CHARS = 100_000
MAX_ARG_KEYS = 10_000  # keys of one add's ``args``, or of one job's, at any depth


class LimitError(ValueError):
    """A value beyond one of the limits above; the message names the limit."""


def check_experiment(title: str, tags: Sequence[str], notes: str) -> None:
    """Refuse a title, tags or notes beyond the limits, naming the limit."""
    if len(title) > MAX_TITLE_CHARS:
        raise LimitError(f"The experiment title has {len(title):,} characters; the limit is {MAX_TITLE_CHARS:,}.")
    if len(tags) > MAX_TAGS:
        raise LimitError(f"The experiment has {len(tags):,} tags; the limit is {MAX_TAGS:,}.")
    for tag in tags:
        if len(tag) > MAX_TAG_CHARS:
            raise LimitError(f"A tag has {len(tag):,} characters ({tag[:40]!r}...); the limit is {MAX_TAG_CHARS:,}.")
    if len(notes) > MAX_NOTES_CHARS:
        raise LimitError(f"The experiment notes have {len(notes):,} characters; the limit is {MAX_NOTES_CHARS:,}.")


def count_keys(value: Any) -> int:
    """The keys of every mapping in ``value``, however deeply nested (in lists too); a job's
    ``SequentialArgs`` counts as its entries. Mappings are asked first: a sweep's args are
    small dicts, and looking for ``entries`` on each was most of this check's cost."""
    if isinstance(value, Mapping):
        return len(value) + sum(count_keys(item) for item in value.values() if isinstance(item, _NESTED))
    if isinstance(value, (list, tuple)):
        return sum(count_keys(item) for item in value if isinstance(item, _NESTED))
    entries = getattr(value, "entries", None)
    if callable(entries):
        found = entries()
        return len(found) + sum(count_keys(item) for _, item in found if isinstance(item, _NESTED))
    return 0


_NESTED = (Mapping, list, tuple)


def check_args(args: Any, what: str = "The work unit's args") -> None:
    """Refuse arguments with more keys (at any depth) than ``MAX_ARG_KEYS``."""
    if args is not None and (count := count_keys(args)) > MAX_ARG_KEYS:
        raise LimitError(f"{what} have {count:,} keys; the limit is {MAX_ARG_KEYS:,}.")
