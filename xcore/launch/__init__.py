"""The launch API, the face script authors see (``import xcore as xm`` re-exports it).

``experiment`` (an experiment and ``add``), ``units`` (work units, roles, awaitables),
``registry`` (create, reopen and list experiments), and the job blocks a script builds:
``job_blocks``, ``executables``, ``packagables``, ``bazel``, ``resources``, ``args``,
``quantities``, ``job_operators``, ``core``, ``utils``. What happens after ``add`` is in
``xcore.runtime``; ``docs/life-of-a-job.md`` follows one job through.
"""
