"""The plugin machinery behind ``xcore.plugin`` (the public plugin API; plugins import that).

``specs`` (every hook, documented), ``host`` (loads plugins, routes each hook to the plugin
that owns the kind), ``kinds`` (the kind registry), ``execution`` (requests, contexts and
handles that hooks receive and return), ``markers``, ``entry_points``, ``serialization``,
``validation``, ``builtin`` (the core's own kinds, stores and trackers).
"""
