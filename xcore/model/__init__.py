"""The ground floor: the job model, importing nothing of xcore above it.

What a job is made of, as plain data: job blocks (``job_blocks``: jobs, groups, executables,
executors), executable specs (``executables``, ``bazel``) and the helpers that build them
(``packagables``), resources and requirements (``resources``, ``quantities``), arguments
(``args``, ``utils``), statuses (``status``), what backends hand back (``execution``: handles,
launch requests and contexts), tracker data (``tracking``), and the attrs helpers they are
written with (``datamodel``, ``validation``). The launch API (``xcore.launch``), the plugin
machinery (``xcore.hooks``), the runtime and the store build on it; it imports only the
basement modules (``xcore.errors``, ``xcore.paths``).
"""
