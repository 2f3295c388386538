"""``xcore port``: XManager/lxm3 launch scripts rewritten for xcore. What depends on a plugin being
installed (names checked against its exports, ported launchers run for real) is in that plugin's
tests: plugins/xlocal/tests/test_local_xm_port.py, plugins/xhpc/tests/test_xhpc_xm_port.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from core_helpers import run_xcore
from xcore.cli.port import port_source

PORTING_DOC = (Path(__file__).resolve().parent.parent / "docs" / "porting.md").read_text()

XM_SCRIPT = textwrap.dedent('''\
    """Docstring stays."""
    # a comment above the imports
    from absl import app
    from xmanager import xm   # trailing comment, odd spacing
    from xmanager import xm_local, xm_abc
    import xmanager.xm_local as local_api
    from xmanager.xm import JobRequirements as Req

    def main(_):
        with xm_local.create_experiment(experiment_title='t') as e:   # keep me
            e.add(xm.Job(exe, xm_local.Vertex(Req(cpu=1))))
            local_api.Kubernetes(cloud_provider='GKE')
            xm_local.Caip()
''')


def test_imports_are_rewritten_and_everything_else_is_kept():
    result = port_source(XM_SCRIPT)
    assert result.code.splitlines() == [
        '"""Docstring stays."""',
        "# a comment above the imports",
        "from absl import app",
        "import xcore as xm   # trailing comment, odd spacing",
        "from xmanager import xm_abc",
        "import xlocal as xm_local",
        "import xgcp",  # added: xm_local.Vertex is used below
        "import xlocal as local_api",
        "import xk8s",
        "from xcore import JobRequirements as Req",
        "",
        "def main(_):",
        "    with xm_local.create_experiment(experiment_title='t') as e:   # keep me",
        "        e.add(xm.Job(exe, xgcp.Vertex(Req(cpu=1))))",
        "        xk8s.Kubernetes(cloud_provider='GKE')",
        "        xm_local.Caip()",
    ]
    assert [c.line for c in result.changes] == [4, 5, 6, 7, 11, 12]


def test_xm_local_cloud_executors_move_to_their_plugins():
    source = ("from xmanager.xm_local import (Local,\n    Vertex, TensorboardCapability)\n"
              "from xmanager.xm_local import KubernetesSpec\n"
              "import xmanager.xm_local as xl\n"
              "spec = xl.Vertex.Spec(push_image_tag='t')  # keep\n")
    result = port_source(source)
    assert result.code == (
        "from xlocal import Local\nfrom xgcp import Vertex, TensorboardCapability\n"
        "from xk8s import KubernetesSpec\n"
        "import xlocal as xl\nimport xgcp\n"
        "spec = xgcp.Vertex.Spec(push_image_tag='t')  # keep\n")
    assert not result.unmapped


def test_a_script_without_xmanager_imports_is_unchanged():
    source = "import os  # nothing to do\nprint(os.sep)\n"
    result = port_source(source)
    assert result.code == source and not result.changes and not result.unmapped


def test_the_command_never_edits_without_write(tmp_path):
    script = tmp_path / "launcher.py"
    script.write_text(XM_SCRIPT)
    shown = run_xcore("port", str(script))
    assert shown.returncode == 1  # something could not be mapped
    assert script.read_text() == XM_SCRIPT
    assert "+import xcore as xm" in shown.stdout and "-from xmanager import xm" in shown.stdout
    # (xm_local.Caip is reported too where xlocal is installed: plugins/xlocal/tests/test_local_xm_port.py)
    assert "not mapped: xmanager.xm_abc" in shown.stderr and "use --write" in shown.stderr

    out = tmp_path / "ported.py"
    assert run_xcore("port", str(script), "-o", str(out)).returncode == 1
    assert script.read_text() == XM_SCRIPT and out.read_text() == port_source(XM_SCRIPT).code

    assert run_xcore("port", "--write", str(script)).returncode == 1
    assert script.read_text() == port_source(XM_SCRIPT).code


def test_bad_input_is_a_one_line_error(tmp_path):
    missing = run_xcore("port", str(tmp_path / "nope.py"))
    assert missing.returncode == 1 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    result = run_xcore("port", str(broken))
    assert result.returncode == 1 and "not valid Python" in result.stderr and "Traceback" not in result.stderr


def test_xmanager_contribs_tensorboard_maps_to_xcores():
    source = ("from xmanager.contrib import tensorboard\n"
              "import xmanager.contrib.tensorboard as tb\n"
              "from xmanager.contrib.tensorboard import add_tensorboard, TensorboardProvider\n"
              "tensorboard.add_tensorboard(experiment, log_dir, executor=executor, timeout_secs=60)\n"
              "port = tb.TensorboardProvider.DEFAULT_TENSORBOARD_PORT\n")
    result = port_source(source)
    assert result.code.splitlines()[:3] == [
        "from xcore.contrib import tensorboard",
        "from xcore.contrib import tensorboard as tb",
        "from xcore.contrib.tensorboard import add_tensorboard, TensorboardProvider",
    ]
    assert result.code.splitlines()[3:] == source.splitlines()[3:]
    assert not result.unmapped


ABSENT = ["xmanager.contrib.xm_tensorflow", "xmanager.contrib.addressing", "xmanager.contrib.parameter_controller",
          "xmanager.contrib.process_entry", "xmanager.contrib.flow", "xmanager.contrib.copybara",
          "xmanager.contrib.framework_defaults", "xmanager.contrib.gcs", "xmanager.contrib.tpu",
          "xmanager.cloud.vertex", "xmanager.cloud.build_image", "xmanager.cloud.docker_lib",
          "xmanager.cloud.cloud_build", "xmanager.cloud.auth", "xmanager.cloud.kubernetes", "xmanager.cloud.utils"]


@pytest.mark.parametrize("module", ABSENT)
def test_each_deliberately_absent_helper_is_listed_with_its_reason_in_one_line(module):
    package, name = module.rsplit(".", 1)
    source = f"from {package} import {name}\nfrom {module} import something\nimport {module} as alias\n"
    result = port_source(source)
    assert result.code == source  # left as it is, for the user to port by hand
    assert [(u.line, u.name) for u in result.unmapped] == [(1, module), (2, f"{module}.something"), (3, module)]
    reasons = {u.reason for u in result.unmapped}
    assert len(reasons) == 1
    [reason] = reasons
    assert reason.startswith("deliberately absent: ") and "\n" not in reason and len(reason) > 40
    assert f"`{module}`" in PORTING_DOC  # and the table in docs/porting.md says the same


def test_an_xmanager_module_nobody_decided_on_is_still_plain_unmapped():
    [unmapped] = port_source("from xmanager.contrib import something_new\n").unmapped
    assert unmapped.reason == "no xcore equivalent; port this by hand"


# XManager's examples/cifar10_tensorflow_k8s_tensorboard launcher, in its shape: every name maps.
XM_K8S_TENSORBOARD = textwrap.dedent('''\
    from absl import app
    from xmanager import xm
    from xmanager import xm_local
    from xmanager.contrib import tensorboard


    def main(_):
      with xm_local.create_experiment(experiment_title='cifar10') as experiment:
        [executable] = experiment.package([xm.Packageable(
            executable_spec=xm.PythonContainer(path='.', entrypoint=xm.ModuleName('cifar10')),
            executor_spec=xm_local.Kubernetes.Spec())])
        log_dir = f'gs://bucket/{experiment.experiment_id}/logs'
        tensorboard.add_tensorboard(experiment, log_dir, executor=xm_local.Kubernetes(), timeout_secs=60)
        experiment.add(xm.Job(executable=executable, executor=xm_local.Kubernetes(),
                              args={'tensorboard_log_dir': log_dir}))
''')


def test_xmanagers_kubernetes_tensorboard_example_ports_without_unmapped_names():
    result = port_source(XM_K8S_TENSORBOARD)
    assert "from xcore.contrib import tensorboard\n" in result.code
    assert "tensorboard.add_tensorboard(experiment, log_dir, executor=xk8s.Kubernetes(), timeout_secs=60)" \
        in result.code
    assert not result.unmapped
