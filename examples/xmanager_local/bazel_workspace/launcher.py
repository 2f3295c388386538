"""An XManager launch script that runs a Bazel-built binary (port it with `xcore port`).

After `xcore port --write launcher.py` in this directory:
    xcore launch --wait launcher.py -- --output=/tmp/arg_printer.txt
The target `//:arg_printer` (BUILD here) builds offline: a genrule that makes a
shell script executable, so it needs no toolchain download.
"""

from absl import app, flags
from xmanager import xm, xm_local

_OUTPUT = flags.DEFINE_string('output', '/tmp/arg_printer.txt', 'File the program writes its argv to.')


def main(argv):
  del argv
  with xm_local.create_experiment(experiment_title='bazel arg printer') as experiment:
    [executable] = experiment.package([
        xm.Packageable(
            executable_spec=xm.BazelBinary(label='//:arg_printer'),
            executor_spec=xm_local.Local.Spec(),
            args={'greeting': 'hello world', 'n': [1, 2]},
        ),
    ])
    experiment.add(xm.Job(executable=executable, executor=xm_local.Local(),
                          env_vars={'OUTPUT_PATH': _OUTPUT.value}))


if __name__ == '__main__':
  app.run(main)
