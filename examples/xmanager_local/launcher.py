"""An XManager launch script, as written for XManager (`from xmanager import ...`).

It does not run as is: port it first, then launch it on this machine:

    xcore port --write launcher.py      # rewrites only the imports, keeps everything else
    xcore launch --wait launcher.py -- --output_dir=/tmp/xm-demo

It uses the XManager idioms a ported script relies on: absl flags and `app.run`, requirements
passed to `xm_local.Local` by position, a job generator filling an empty `xm.JobGroup`,
`work_unit.get_full_job_name`, list-valued flags and `None` flags left out.
"""

import sys

from absl import app, flags
from xmanager import (
  xm,  # XManager's launch API
  xm_local,
)

_OUTPUT_DIR = flags.DEFINE_string('output_dir', '/tmp/xm-demo', 'Where each job writes what it received.')

# A tiny "trainer": writes its argv and one env var to $OUTPUT_DIR/<job name>.txt.
_PROGRAM = (
    'import os, sys\n'
    'os.makedirs(os.environ["OUTPUT_DIR"], exist_ok=True)\n'
    'path = os.path.join(os.environ["OUTPUT_DIR"], os.environ["JOB"] + ".txt")\n'
    'open(path, "w").write(repr(sys.argv[1:]) + "\\n")\n'
)


def main(argv):
  del argv
  with xm_local.create_experiment(experiment_title='xmanager style') as experiment:
    executor = xm_local.Local(xm.JobRequirements(cpu=1), experimental_stream_output=False)
    [trainer] = experiment.package([
        xm.binary(executor_spec=executor.Spec(), path=sys.executable, args=['-c', _PROGRAM]),
    ])
    env = {'OUTPUT_DIR': _OUTPUT_DIR.value}

    for lr in (0.1, 0.01):
      experiment.add(xm.Job(trainer, executor, args={'lr': lr, 'layers': [64, 32], 'resume': None},
                            env_vars={**env, 'JOB': f'sweep_{lr}'}))

    async def learner_and_server(work_unit, steps):
      group = xm.JobGroup()
      group.jobs['server'] = xm.Job(trainer, executor, env_vars={**env, 'JOB': 'server'})
      group.jobs['learner'] = xm.Job(
          trainer, executor,
          args={'steps': steps, 'server': work_unit.get_full_job_name('server')},
          env_vars={**env, 'JOB': 'learner'})
      await work_unit.add(group)

    experiment.add(learner_and_server, args={'steps': 3})


if __name__ == '__main__':
  app.run(main)
