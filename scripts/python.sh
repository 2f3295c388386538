# Shared by quickstart.sh and test.sh: find Python 3.11+ and make ./.venv with it.
find_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "error: xcore needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
  return 1
}

ensure_venv() {
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    local py; py=$(find_python)
    echo "==> creating .venv with $($py --version)"
    rm -rf .venv
    "$py" -m venv .venv
  fi
}

# The core was distributed as `xcore` before 0.1.0 was released as `xcore-core` (the name
# `xcore` belongs to an unrelated project on PyPI). Drop the old editable install so one
# distribution owns the `xcore` package in .venv.
drop_renamed_core() {
  if .venv/bin/python -c 'import importlib.metadata as m; m.distribution("xcore")' 2>/dev/null; then
    echo "==> removing the old 'xcore' distribution from .venv (the core is now 'xcore-core')"
    .venv/bin/python -m pip uninstall --quiet --yes xcore
  fi
}
