"""The plugin machinery behind ``xcore.plugin`` (the public plugin API; plugins import that).

Floor 3: above the model and the store, below the runtime. ``specs`` (every hook,
documented), ``backend`` (``Backend``, the execution hooks as one object's methods), ``host``
(loads plugins, routes each call to the backend or plugin that owns the kind), ``kinds`` (the
kind registry), ``markers``, ``entry_points``, ``serialization`` (models to JSON and back),
``builtin`` (the core's own kinds, stores and trackers). What hooks receive and return
(requests, contexts, handles) is model: ``xcore.model.execution``.
"""
