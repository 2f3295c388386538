"""One session of xcore, as the command line, the dashboard and the launch API share it: its
settings, plugin host and store (``session``), and the one read model of what was launched
that every reader renders (``views``). Light to import: nothing is built until needed."""

from xcore.workspace.session import Workspace, current

__all__ = ["Workspace", "current"]
