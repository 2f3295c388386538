"""Grid Engine has no gang (docs/gangs.md): a JobGroup's jobs stay separate jobs, with a
one-time warning, and replicas/distributed are refused with what to do instead."""

from __future__ import annotations

from pathlib import Path

import pytest

import xcore as xm
from xcore.testing import require_service
from xhpc_helpers import HOW, cluster_toml, service_up

pytestmark = pytest.mark.infra("sge")


@pytest.fixture
def sge(xcore_env: Path) -> None:
    require_service("sge", lambda: service_up("sge"), HOW)
    (xcore_env / "config" / "clusters.toml").write_text(
        cluster_toml("test", "sge", "local", str(xcore_env / "staging")))


def test_job_group_runs_as_separate_jobs_with_a_warning(sge: None, capfd: pytest.CaptureFixture[str]) -> None:
    import xhpc
    from xhpc import launch

    launch._warned.discard("sge")
    with xm.create_experiment(title="group") as experiment:
        [exe] = experiment.package([xm.Packageable(xhpc.Command(['echo "role $1"']), xhpc.GridEngine.Spec())])
        experiment.add(xm.JobGroup(learner=xm.Job(exe, xhpc.GridEngine(), args=["learner"]),
                                   actor=xm.Job(exe, xhpc.GridEngine(), args=["actor"])))
    jobs = experiment.wait_until_complete(timeout=150)
    assert [job.status for job in jobs] == [xm.Status.COMPLETED] * 2
    assert "Grid Engine has no gangs" in capfd.readouterr().err


def test_replicas_are_refused_with_what_to_do(sge: None) -> None:
    import xhpc
    from xcore.errors import ExperimentUnitError

    with pytest.raises(ExperimentUnitError, match="replicas and distributed= need Slurm"):
        with xm.create_experiment(title="replicas") as experiment:
            [exe] = experiment.package([xm.Packageable(xhpc.Command(["true"]), xhpc.GridEngine.Spec())])
            experiment.add(xm.Job(exe, xhpc.GridEngine(requirements=xm.JobRequirements(replicas=2),
                                                       distributed="torch")))
