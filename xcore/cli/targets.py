"""How commands name what they act on: ``EXP`` (an experiment) or ``EXP/WU`` (one work unit)."""

from __future__ import annotations

from xcore.errors import XcoreError


def parse_target(text: str) -> tuple[int, int | None]:
    """``"3"`` -> ``(3, None)``, ``"3/7"`` -> ``(3, 7)``."""
    experiment, _, unit = text.partition("/")
    try:
        return int(experiment), (int(unit) if unit else None)
    except ValueError:
        raise XcoreError(f"{text!r} is not an experiment reference: write EXP or EXP/WU, e.g. 3 or 3/7.") from None
