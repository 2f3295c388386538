"""``xcore port`` of lxm3 launch scripts to xcore and xhpc (moved from the core's
tests/test_xm_compat_port.py): ``Config`` is checked against xhpc.xm_cluster's exports."""

from __future__ import annotations

from xcore.cli.port import port_source


def test_lxm3_imports_map_to_xcore_and_xhpc():
    source = "from lxm3 import xm\nfrom lxm3 import xm_cluster\nfrom lxm3.xm_cluster import ArrayJob, Config\n"
    result = port_source(source)
    assert result.code == (
        "import xcore as xm\nfrom xhpc import xm_cluster\nfrom xhpc.xm_cluster import ArrayJob, Config\n")
    assert [u.name for u in result.unmapped] == ["lxm3.xm_cluster.Config"]
