"""An XManager Kubernetes launch script, ported with ``xcore port``, launches on xk8s.Kubernetes:
its PythonContainer is built by the real dockerd and pushed to the real registry, and the
real kubernetes client creates the sweep on the fake API server, whose kubelet runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from xcore.testing.images import LOCAL_REGISTRY, require_docker_and_registry

REGISTRY = LOCAL_REGISTRY


# Written for XManager, in the shape of its cifar10 Kubernetes examples: a PythonContainer of the
# launcher's directory packaged for xm_local.Kubernetes.Spec(), one xm_local.Kubernetes job per
# learning rate, each told where to write its TensorBoard logs.
XM_K8S_LAUNCHER = textwrap.dedent('''\
    """Sweep the learning rate of a CIFAR-10 trainer on Kubernetes."""
    import itertools
    import os

    from absl import app
    from absl import flags
    from xmanager import xm
    from xmanager import xm_local

    _LOG_DIR = flags.DEFINE_string('tensorboard_log_dir', '/tmp/tb', 'Where trials write TensorBoard logs.')
    _BASE_IMAGE = flags.DEFINE_string('base_image', 'gcr.io/deeplearning-platform-release/tf2-gpu.2-6',
                                      'Image the trainer is installed on.')


    def main(_):
      with xm_local.create_experiment(experiment_title='cifar10') as experiment:
        spec = xm.PythonContainer(
            path='.',
            base_image=_BASE_IMAGE.value,
            entrypoint=xm.ModuleName('cifar10'),
        )
        [executable] = experiment.package([
            xm.Packageable(executable_spec=spec, executor_spec=xm_local.Kubernetes.Spec()),
        ])

        trials = [dict(learning_rate=lr) for (lr,) in itertools.product([0.1, 0.001])]
        log_dir = f'{_LOG_DIR.value}/{experiment.experiment_id}/logs'
        for i, hyperparameters in enumerate(trials):
          experiment.add(xm.Job(
              executable=executable,
              executor=xm_local.Kubernetes(),
              args=dict({'tensorboard_log_dir': os.path.join(log_dir, str(i)), **hyperparameters}),
          ))


    if __name__ == '__main__':
      app.run(main)
''')

TRAINER = "import json, sys\nprint(json.dumps(sys.argv[1:]), flush=True)\n"


def _xcore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd, env={**os.environ, "XCORE_QUIET": "1"})


def test_ported_xmanager_kubernetes_sweep_launches_on_xk8s(fake_k8s_run, tmp_path, monkeypatch):
    require_docker_and_registry()
    project = tmp_path / "cifar10"
    project.mkdir()
    (project / "cifar10.py").write_text(TRAINER)
    script = project / "launcher.py"
    script.write_text(XM_K8S_LAUNCHER)
    ported = _xcore("port", "--write", str(script), cwd=project)
    assert ported.returncode == 0, ported.stderr  # every name maps
    text = script.read_text()
    assert "import xlocal as xm_local\nimport xk8s\n" in text
    assert "executor_spec=xk8s.Kubernetes.Spec()" in text and "executor=xk8s.Kubernetes()" in text

    monkeypatch.setenv("XCORE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XK8S_REGISTRY", f"{REGISTRY}/xcore-xmport")
    # The fake kubelet ignores images and runs the command here: start it in the project
    # directory, which is what the built image's working directory holds.
    monkeypatch.chdir(project)
    launched = _xcore("launch", "--wait", str(script), "--", "--base_image=xcore-python:3.11",
                      "--tensorboard_log_dir=/tb", cwd=project)
    assert launched.returncode == 0, launched.stderr

    [job] = fake_k8s_run.list("Job", "default")  # the sweep is one Indexed Job
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["completions"] == 2
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith(f"{REGISTRY}/xcore-xmport/")  # built and pushed for real
    shown = json.loads(_xcore("show", "1", "--json", cwd=project).stdout)
    assert [u["status"] for u in shown["work_units"]] == ["COMPLETED", "COMPLETED"], shown
    received = [json.loads(_xcore("logs", f"1/{unit['id']}", cwd=project).stdout.strip())
                for unit in shown["work_units"]]
    assert received == [["--tensorboard_log_dir=/tb/1/logs/0", "--learning_rate=0.1"],
                        ["--tensorboard_log_dir=/tb/1/logs/1", "--learning_rate=0.001"]]
