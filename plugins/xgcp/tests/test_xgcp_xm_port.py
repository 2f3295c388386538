"""An XManager Vertex launch script, ported with ``xcore port``, launches on xgcp.Vertex against
the fake Vertex API (the real aiplatform_v1 client over REST)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from xgcp_testkit import jobs

import xcore as xm

IMAGE = "us-docker.pkg.dev/fake-project/lab/cifar10:1"
TENSORBOARD = "projects/fake-project/locations/us-central1/tensorboards/77"
TRAINER = "import json, sys\nprint('TRAINER ' + json.dumps(sys.argv[1:]), flush=True)\n"

# Written for XManager, in the shape of its cifar10 Vertex examples: absl flags, a container
# packaged for xm_local.Vertex.Spec(push_image_tag=...), a sweep of xm_local.Vertex jobs with a
# T4 or TPU requirement and a TensorboardCapability per trial. Only this file's imports and
# xm_local's Vertex names change when it is ported.
XM_VERTEX_LAUNCHER = textwrap.dedent('''\
    """Sweep the learning rate of a CIFAR-10 trainer on Vertex AI."""
    import itertools
    import os

    from absl import app
    from absl import flags
    from xmanager import xm
    from xmanager import xm_local

    FLAGS = flags.FLAGS
    flags.DEFINE_string('image_path', None, 'A prebuilt trainer image.')
    flags.DEFINE_string('tensorboard', None, 'Vertex TensorBoard instance.')
    flags.DEFINE_integer('gpus_per_node', 2, 'T4 GPUs per trial.')
    flags.DEFINE_boolean('tpu', False, 'Train on a TPU v2-8 instead.')


    def main(_):
      with xm_local.create_experiment(experiment_title='cifar10') as experiment:
        if FLAGS.image_path:
          spec = xm.Container(image_path=FLAGS.image_path)
        else:
          spec = xm.PythonContainer(path='.', base_image='gcr.io/deeplearning-platform-release/tf2-gpu.2-6',
                                    entrypoint=xm.ModuleName('cifar10'))
        [executable] = experiment.package([
            xm.Packageable(executable_spec=spec,
                           executor_spec=xm_local.Vertex.Spec(push_image_tag='cifar10:latest'),
                           args={}),
        ])

        trials = [dict(learning_rate=lr) for (lr,) in itertools.product([0.1, 0.001])]
        if FLAGS.tpu:
          requirements = xm.JobRequirements(tpu_v2=8)
        else:
          requirements = xm.JobRequirements(t4=FLAGS.gpus_per_node)
        for i, hyperparameters in enumerate(trials):
          output_dir = os.environ.get('GOOGLE_CLOUD_BUCKET_NAME', None)
          if output_dir:
            output_dir = os.path.join(output_dir, str(experiment.experiment_id), str(i))
          tensorboard_capability = xm_local.TensorboardCapability(
              name=FLAGS.tensorboard, base_output_directory=output_dir)
          experiment.add(xm.Job(
              executable=executable,
              executor=xm_local.Vertex(tensorboard=tensorboard_capability, requirements=requirements),
              args=hyperparameters,
          ))


    if __name__ == '__main__':
      app.run(main)
''')


def _xcore(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xcore.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=cwd, env={**os.environ, "XCORE_QUIET": "1"})


def _ported(tmp_path: Path) -> Path:
    script = tmp_path / "launcher.py"
    script.write_text(XM_VERTEX_LAUNCHER)
    ported = _xcore("port", "--write", str(script), cwd=tmp_path)
    assert ported.returncode == 0, ported.stderr  # every name maps
    text = script.read_text()
    assert "import xlocal as xm_local\nimport xgcp\n" in text
    assert "executor_spec=xgcp.Vertex.Spec(push_image_tag='cifar10:latest')" in text
    assert "xgcp.TensorboardCapability(" in text and "executor=xgcp.Vertex(tensorboard=" in text
    assert "xm_local.create_experiment(" in text  # experiments stay xlocal's (= xcore's)
    return script


@pytest.mark.parametrize("tpu", [False, True], ids=["t4", "tpu"])
def test_ported_xmanager_vertex_sweep_launches_on_xgcp(vertex, xcore_home, tmp_path, monkeypatch, tpu):
    vertex.add_image(IMAGE, [sys.executable, "-c", TRAINER])
    monkeypatch.setenv("GOOGLE_CLOUD_BUCKET_NAME", "gs://lab-bucket/cifar10")
    # The target names what XManager took from gcloud's defaults (TensorBoard needs a service account).
    config = Path(os.environ["XCORE_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "vertex.toml").write_text(
        'default = "lab"\n[targets.lab]\nproject = "fake-project"\nlocation = "us-central1"\n'
        'service_account = "trainer@fake-project.iam.gserviceaccount.com"\n')
    script = _ported(tmp_path)
    flags = [f"--image_path={IMAGE}", f"--tensorboard={TENSORBOARD}"] + (["--tpu"] if tpu else [])
    launched = _xcore("launch", "--wait", str(script), "--", *flags, cwd=tmp_path)
    assert launched.returncode == 0, launched.stderr

    experiment_id = 1  # the first experiment of this test's own XCORE_HOME
    found = jobs(experiment_id)
    assert [j.status for j in found] == [xm.Status.COMPLETED] * 2, [j.message for j in found]
    created = sorted(vertex.jobs.values(), key=lambda j: j.job_spec.worker_pool_specs[0].container_spec.args[0])
    assert len(created) == 2
    for job, (lr, trial) in zip(created, [("0.001", 1), ("0.1", 0)], strict=True):
        spec = job.job_spec
        [pool] = spec.worker_pool_specs
        assert list(pool.container_spec.args) == [f"--learning_rate={lr}"]
        assert pool.container_spec.image_uri == IMAGE
        if tpu:
            assert (pool.machine_spec.machine_type, pool.machine_spec.accelerator_type.name) == (
                "cloud-tpu", "TPU_V2")
        else:
            assert (pool.machine_spec.accelerator_type.name, pool.machine_spec.accelerator_count) == (
                "NVIDIA_TESLA_T4", 2)
        assert spec.tensorboard == TENSORBOARD
        assert spec.base_output_directory.output_uri_prefix == f"gs://lab-bucket/cifar10/{experiment_id}/{trial}"
