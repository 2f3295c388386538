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
