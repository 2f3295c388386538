#!/usr/bin/env bash
# Run the whole test suite: install the core, every plugin and the test tools into ./.venv,
# start the real services the tests use (Slurm, Grid Engine, sshd, dockerd) when run as root,
# then run pytest. Extra arguments go to pytest, e.g. scripts/test.sh -k store -x
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python.sh
ensure_venv
echo "==> installing xcore, plugins and test tools into .venv"
packages=(-e '.[test]' -e 'plugins/xlocal[docker]' -e plugins/xhpc -e 'plugins/xk8s[test]')
.venv/bin/python -m pip install --quiet --disable-pip-version-check "${packages[@]}" pytest-timeout

if [ "$(id -u)" = 0 ] && [ -z "${XCORE_SKIP_INFRA:-}" ]; then
  echo "==> starting test services (scripts/infra/setup.sh)"
  bash scripts/infra/setup.sh all
else
  echo "==> not root (or XCORE_SKIP_INFRA set): tests that need Slurm, SGE, sshd or Docker will skip"
fi

echo "==> pytest"
exec .venv/bin/python -m pytest --timeout=600 "$@"
