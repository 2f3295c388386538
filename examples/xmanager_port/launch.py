"""An XManager launch script ported to xcore: only the imports changed.

Before:
    from xmanager import xm
    from xmanager import xm_local
After:
    import xcore as xm
    import xlocal as xm_local
"""

from __future__ import annotations

import asyncio
import sys

import xcore as xm
import xlocal as xm_local


async def main() -> None:
    async with xm.create_experiment(experiment_title="ported from xmanager") as experiment:
        [executable] = experiment.package(
            [xm.binary(executor_spec=xm_local.Local.Spec(), path=sys.executable,
                       args=["-c", "import sys; print('hello from', sys.argv[1:])"])]
        )
        experiment.context.annotations.add_tags("xmanager-port")
        for seed in range(3):
            await experiment.add(xm.Job(executable, xm_local.Local(), args={"seed": seed}))

        async def evaluate(work_unit: xm.WorkUnit, checkpoint: str) -> None:  # a job generator
            work_unit.add(xm.Job(executable, xm_local.Local(), args={"checkpoint": checkpoint}))

        unit = await experiment.add(evaluate, args={"checkpoint": "/tmp/ckpt-1"})
        await unit.wait_until_complete()


asyncio.run(main())
