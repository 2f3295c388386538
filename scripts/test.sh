#!/usr/bin/env bash
# Run the whole test suite: install the core, every plugin, the test and docs tools and the pinned linters
# into ./.venv, lint the repository (ruff, then mypy; findings fail the run), start the real
# services the tests use (Slurm, Grid Engine, sshd, dockerd, PostgreSQL) when run as root, then run pytest.
# Extra arguments go to pytest, e.g. scripts/test.sh -k store -x
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python.sh
ensure_venv
drop_renamed_core
echo "==> installing xcore, plugins, test tools and linters into .venv"
packages=(-e '.[test,postgres,ui,docs]' -e 'plugins/xlocal[docker]' -e 'plugins/xhpc[lxm3]' -e plugins/xgcp -e 'plugins/xk8s[test]')
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${packages[@]}" pytest-timeout pytest-xdist==3.8.0 \
  -r scripts/lint-tools.txt
# XManager's launch API itself (xmanager.xm only, so none of its cloud dependencies): the tests
# compare xcore's executable names, architectures and xm.utils with XManager's own.
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps xmanager==0.8.5 immutabledict
# TensorBoard, which xcore.contrib.tensorboard's auxiliary unit serves in its xlocal test
# (plugins/xlocal/tests/test_contrib_tensorboard_local.py); xcore itself never imports it.
.venv/bin/python -m pip install --quiet --disable-pip-version-check tensorboard
# torch, CPU build, for the real torch.distributed (gloo) all-reduce that a replicated job runs
# on xlocal and Slurm with only `distributed=` set (xcore/testing/allreduce.py; a missing torch
# fails those tests in CI). Pinned exactly: an unpinned torch would pull the CUDA build (GBs);
# 2.13.0+cpu is the wheel in the local wheel directory (pip's find-links). xcore never imports it.
# jax and jaxlib likewise, for jax.distributed.initialize() (gloo CPU collectives) in the same
# tests: jaxlib is an 85 MB wheel from the local mirror (with scipy), about 25 s to install.
.venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0 jax==0.10.2 jaxlib==0.10.2

# What is linted is configured in one place, pyproject.toml: ruff checks every Python file of the
# repository (core, plugins, examples, tests, bench, scripts), mypy the packages in [tool.mypy] files
# (the core and every plugin). mypy keeps its cache in .mypy_cache, so a second run takes a second.
if [ -z "${XCORE_SKIP_LINT:-}" ]; then
  echo "==> lint: ruff check, mypy"
  .venv/bin/ruff check --quiet || { echo "error: ruff found problems (ruff check --fix repairs import order)" >&2; exit 1; }
  .venv/bin/mypy || { echo "error: mypy found type errors" >&2; exit 1; }
else
  echo "==> XCORE_SKIP_LINT set: not linting"
fi

if [ "$(id -u)" = 0 ] && [ -z "${XCORE_SKIP_INFRA:-}" ]; then
  echo "==> starting test services (scripts/infra/setup.sh)"
  bash scripts/infra/setup.sh all
  bash scripts/infra/bazel.sh  # Bazel for the BazelBinary tests
else
  echo "==> not root (or XCORE_SKIP_INFRA set): tests that need Slurm, SGE, sshd, Docker or PostgreSQL will skip"
fi

echo "==> pytest"
# --durations: the slowest tests, so a run that creeps towards the 20-minute budget says where.
# Two workers, one per group of conftest.py: the tests of the real schedulers on one, one after
# another, everything else on the other. XCORE_TEST_WORKERS=1 runs the suite in one process.
workers=${XCORE_TEST_WORKERS:-2}
parallel=()
[ "$workers" -gt 1 ] && parallel=(-n "$workers")
exec .venv/bin/python -m pytest --timeout=600 --durations=20 "${parallel[@]}" "$@"
