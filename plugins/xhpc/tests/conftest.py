from xhpc_helpers import cluster, xcore_env  # noqa: F401  (fixtures)
