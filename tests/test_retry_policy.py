"""``xm.Retry``: bad policies are refused when written, and every launch request carries the
job's resolved policy (its own, else its executor's, else the default)."""

from __future__ import annotations

import pytest

import xcore as xm
from xcore.model.retry import DEFAULT_RETRY, Retry
from xcore.model.status import FAILURE_CLASSES, JobState, Status
from xcore.plumbing.attempts import checkpoint_dir
from xcore.plumbing.exits import exit_state, failed_state, lost_state
from xcore.testing import fake, plugin_host


def test_the_default_retries_preemption_and_node_failure_never_the_program():
    assert DEFAULT_RETRY == Retry(3, ("preempted", "node_failure"))
    assert DEFAULT_RETRY.retries("preempted", None, 1) and DEFAULT_RETRY.retries("node_failure", None, 2)
    assert not DEFAULT_RETRY.retries("preempted", None, 3)  # the third attempt was the last
    assert not DEFAULT_RETRY.retries("error", 3, 1)
    assert not DEFAULT_RETRY.retries(None, 1, 1)  # no class reads "error"


def test_exit_codes_and_classes_say_what_is_retried():
    policy = Retry(max_attempts=4, on=("preemption", "timeout"), exit_codes=(3,), backoff_secs=2)
    assert policy.on == ("preempted", "timeout")
    assert policy.retries("error", 3, 3) and not policy.retries("error", 4, 1)
    assert not policy.retries("out_of_memory", 3, 1)  # an exit code retries a program's own failure only
    assert [policy.backoff(n) for n in (1, 2, 3)] == [2, 4, 8]
    assert Retry.from_json(policy.to_json()) == policy
    assert Retry(on="error").on == ("error",)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": "3"}, "max_attempts"),
    ({"on": ("preemptoin",)}, "unknown failure class 'preemptoin'"),
    ({"on": 3}, "failure class names"),
    ({"exit_codes": (0,)}, "1 to 255"),
    ({"exit_codes": ("3",)}, "1 to 255"),
    ({"backoff_secs": -1}, "backoff_secs"),
    ({"backoff_secs": float("nan")}, "backoff_secs"),
])
def test_a_bad_policy_is_refused_with_what_to_fix(kwargs, words):
    with pytest.raises((ValueError, TypeError), match=words):
        Retry(**kwargs)


def test_retry_must_be_a_policy_on_jobs_and_executors():
    with pytest.raises(TypeError, match=r"Job\(retry=...\) takes xm.Retry"):
        xm.Job(xm.Executable(name="x"), fake.FakeExecutor(), retry=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="retry"):
        fake.FakeExecutor(retry={"max_attempts": 2})  # type: ignore[arg-type]


def test_failure_classes_of_the_plumbing_states():
    assert exit_state(3).failure == "error" and exit_state(0).failure is None
    assert lost_state("gone").failure == "lost"
    state = failed_state("preempted", "preempted", attempt=2)
    assert (state.status, state.failure, state.attempt) == (Status.FAILED, "preempted", 2)
    with pytest.raises(ValueError, match="not one of"):
        failed_state("tired", "x")
    assert set(FAILURE_CLASSES) >= {"preempted", "node_failure", "timeout", "out_of_memory", "error"}
    assert JobState(Status.RUNNING).previous_attempts == ()
    assert checkpoint_dir("/state", 4, 7) == "/state/checkpoints/4/7"


def test_each_launch_request_carries_the_resolved_policy(monkeypatch):
    seen = []
    real = fake.xcore_launch

    def spy(executor_kind, requests, context):
        seen.extend(requests)
        return real(executor_kind, requests, context)

    monkeypatch.setattr(fake, "xcore_launch", fake.hookimpl(spy))
    plugin_host({"fake": fake})
    own, shared = Retry(max_attempts=5, on=("error",)), Retry(max_attempts=2)
    with xm.create_experiment("policies") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        plain = fake.FakeExecutor()
        experiment.add(xm.Job(exe, plain))
        experiment.add(xm.Job(exe, fake.FakeExecutor(retry=shared)))
        experiment.add(xm.Job(exe, fake.FakeExecutor(retry=shared), retry=own))
    by_unit = {r.work_unit_id: r for r in seen}
    assert [by_unit[u].retry for u in (1, 2, 3)] == [DEFAULT_RETRY, shared, own]
    assert all(r.attempt == 1 for r in seen)
    stored = {u.id: u.jobs[0].executor.get("retry") for u in experiment._store.work_units(experiment.experiment_id)}
    assert stored[1] is None and Retry.from_json(stored[3]) == own  # the job's own policy is kept with its executor


def test_an_executor_refuses_an_explicit_policy_at_add_and_never_the_default(monkeypatch):
    checked: list[Retry] = []

    def check_policy(self, retry: Retry) -> None:
        checked.append(retry)
        if retry.max_attempts > 2:
            raise xm.ConfigurationError("FakeExecutor: at most 2 attempts; give retry=xm.Retry(max_attempts=2).")

    monkeypatch.setattr(fake.FakeExecutor, "check_policy", check_policy)
    plugin_host({"fake": fake})
    two, five = Retry(max_attempts=2), Retry(max_attempts=5)
    with xm.create_experiment("refusals") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        experiment.add(xm.Job(exe, fake.FakeExecutor()))  # the default policy: never checked
        experiment.add(xm.Job(exe, fake.FakeExecutor(retry=two)))
        with pytest.raises(xm.ConfigurationError, match="at most 2 attempts"):
            experiment.add(xm.Job(exe, fake.FakeExecutor(retry=five)))
        with pytest.raises(xm.ConfigurationError, match="at most 2 attempts"):
            experiment.add(xm.Job(exe, fake.FakeExecutor(retry=two), retry=five))  # the job's own overrides
    assert checked == [two, five, two, five]
    assert [u.id for u in experiment._store.work_units(experiment.experiment_id)] == [1, 2]  # refused: no unit
