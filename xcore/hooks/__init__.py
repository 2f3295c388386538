"""The plugin machinery behind ``xcore.plugin`` (the public plugin API; plugins import that).

``specs`` (every hook, documented), ``backend`` (``Backend``, the execution hooks as one
object's methods), ``host`` (loads plugins, routes each call to the backend or plugin that
owns the kind), ``kinds`` (the kind registry), ``execution`` (requests, contexts and
handles that hooks receive and return), ``markers``, ``entry_points``, ``serialization``,
``validation``, ``builtin`` (the core's own kinds, stores and trackers).
"""
