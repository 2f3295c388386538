"""The pluggy markers for project "xcore". Plugins use ``@xcore.hookimpl``."""

import pluggy

hookspec = pluggy.HookspecMarker("xcore")
hookimpl = pluggy.HookimplMarker("xcore")
