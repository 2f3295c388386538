"""Example plugin: ``Inline`` runs each job synchronously at launch."""

from xinline.model import Inline, InlineHandle, InlineProcess, InlineSpec

__version__ = "0.1.0"

__all__ = ["Inline", "InlineSpec", "InlineProcess", "InlineHandle"]
