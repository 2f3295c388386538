"""An lxm3 launch script, as written for lxm3 (`from lxm3 import ...`).

Port it first, then run it on this machine or on a cluster from clusters.toml:

    xcore port --write launcher.py
    xcore launch --wait launcher.py -- --seeds=3
    xcore launch --wait launcher.py -- --seeds=3 --launch_on_cluster   # the default cluster

Each task of the array job prints its flags and its TASK environment variable.
"""

from absl import app, flags
from lxm3 import xm, xm_cluster

_LAUNCH_ON_CLUSTER = flags.DEFINE_boolean('launch_on_cluster', False, 'Submit to Slurm instead of running here.')
_SEEDS = flags.DEFINE_integer('seeds', 2, 'How many tasks the array job has.')


def main(_):
    with xm_cluster.create_experiment(experiment_title='lxm3 array') as experiment:
        requirements = xm_cluster.JobRequirements(cpu=1, ram=1 * xm.GB)
        if _LAUNCH_ON_CLUSTER.value:
            executor = xm_cluster.Slurm(requirements, walltime=5 * xm.Min)
        else:
            executor = xm_cluster.Local(requirements)
        spec = xm_cluster.PythonPackage(path='.', entrypoint=xm_cluster.ModuleName('demo_pkg.main'))
        [executable] = experiment.package([xm.Packageable(spec, executor_spec=executor.Spec())])
        experiment.add(xm_cluster.ArrayJob(
            executable=executable, executor=executor,
            args=[{'seed': seed} for seed in range(_SEEDS.value)],
            env_vars=[{'TASK': f'task-{seed}'} for seed in range(_SEEDS.value)],
        ))


if __name__ == '__main__':
    app.run(main)
