"""The launch API, the face script authors see (``import xcore as xm`` re-exports it).

Floor 5 of the core (see ``docs/life-of-a-job.md``): above the runtime and the plugin host,
below the CLI. ``experiment`` (an experiment and ``add``), ``units`` (work units, roles,
awaitables), ``registry`` (create, reopen and list experiments), ``core`` (XManager's
``xm.core`` names), ``vcs`` (the launch script's commit). The job blocks a script builds
(jobs, executables, resources, args) are the ground floor, ``xcore.model``; what happens
after ``add`` is in ``xcore.runtime``.
"""
