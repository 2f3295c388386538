#!/usr/bin/env bash
# Install Bazel for the Bazel-target tests (Debian's bazel-bootstrap; it builds genrule and
# shell targets offline). Idempotent; needs root. Exit 0 when `bazel` is on PATH afterwards.
set -euo pipefail
if command -v bazel >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "bazel.sh: bazel is not installed and this is not root; skipping" >&2
    exit 3
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends bazel-bootstrap >/dev/null 2>&1; then
    apt-get update -qq
    apt-get install -y --no-install-recommends bazel-bootstrap >/dev/null
fi
command -v bazel >/dev/null
