"""clusters.toml is refused beyond its size limits when it is read (issue 30), with the limit
named: a 1 MB host used to reach ssh and end in "Argument list too long"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from xcore.plugin import ConfigurationError
from xhpc import config
from xhpc_helpers import cluster_toml


def test_a_value_beyond_the_limit_is_refused_naming_it(xcore_env: Path) -> None:
    path = xcore_env / "config" / "clusters.toml"
    path.write_text(cluster_toml("test", "slurm", "ssh", "/tmp/x").replace('"127.0.0.1"', '"' + "h" * 1_000_000 + '"'))
    with pytest.raises(ConfigurationError, match=r"clusters\.test\.host .* the limit is 4,096"):
        config.load_clusters(path)
    out = subprocess.run([sys.executable, "-m", "xcore.cli.main", "cluster", "check", "test"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode != 0
    assert "the limit is 4,096" in out.stdout + out.stderr and "Argument list too long" not in out.stdout + out.stderr


def test_a_file_beyond_the_limit_is_refused(xcore_env: Path) -> None:
    path = xcore_env / "config" / "clusters.toml"
    path.write_text(cluster_toml("test", "slurm", "local", "/tmp/x") + "#" * (1 << 20) + "\n")
    with pytest.raises(ConfigurationError, match="larger than the limit of 1,048,576 bytes"):
        config.load_clusters(path)


def test_values_at_the_limit_are_read(xcore_env: Path) -> None:
    path = xcore_env / "config" / "clusters.toml"
    staging = "/tmp/" + "s" * (config.MAX_VALUE_CHARS - 5)
    path.write_text(cluster_toml("test", "slurm", "local", staging))
    clusters, _ = config.load_clusters(path)
    assert clusters["test"].staging == staging
