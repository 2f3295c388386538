"""Size limits on what a launch records (issue 30): beyond them ``create_experiment`` and
``add`` refuse with the limit named, before anything is stored; at them, all is accepted."""

from __future__ import annotations

import pytest

import xcore as xm
from xcore.launch.registry import open_store
from xcore.model import limits
from xcore.testing import fake, plugin_host


@pytest.fixture(autouse=True)
def _fake(xcore_home):
    plugin_host({"fake": fake})


@pytest.mark.parametrize(("kwargs", "limit"), [
    ({"title": "t" * (limits.MAX_TITLE_CHARS + 1)}, f"{limits.MAX_TITLE_CHARS:,}"),
    ({"tags": [f"tag{i}" for i in range(limits.MAX_TAGS + 1)]}, f"{limits.MAX_TAGS:,}"),
    ({"tags": ["x" * (limits.MAX_TAG_CHARS + 1)]}, f"{limits.MAX_TAG_CHARS:,}"),
    ({"notes": "n" * (limits.MAX_NOTES_CHARS + 1)}, f"{limits.MAX_NOTES_CHARS:,}"),
], ids=["title", "tags", "tag", "notes"])
def test_an_experiment_beyond_a_limit_is_refused_before_it_is_recorded(kwargs, limit):
    with pytest.raises(limits.LimitError, match=f"the limit is {limit}"):
        xm.create_experiment(**kwargs)
    assert open_store().list_experiments() == []


def test_an_experiment_at_the_limits_is_accepted():
    tags = ["x" * limits.MAX_TAG_CHARS + str(i) for i in range(limits.MAX_TAGS)]
    tags = [tag[: limits.MAX_TAG_CHARS] for tag in tags]
    with xm.create_experiment(title="t" * limits.MAX_TITLE_CHARS, tags=tags) as experiment:
        pass
    assert open_store().get_experiment(experiment.experiment_id).title == "t" * limits.MAX_TITLE_CHARS


def test_too_many_argument_keys_are_refused_and_the_rest_runs():
    too_many = {f"k{i}": i for i in range(limits.MAX_ARG_KEYS + 1)}
    at_limit = {f"k{i}": i for i in range(limits.MAX_ARG_KEYS - 1)}
    with xm.create_experiment("args") as experiment:
        [exe] = experiment.package([xm.binary(fake.FakeSpec(), "true")])
        for refused in ({"args": too_many}, None):
            job = xm.Job(exe, fake.FakeExecutor(), args=too_many if refused is None else None)
            with pytest.raises(limits.LimitError, match=f"the limit is {limits.MAX_ARG_KEYS:,}"):
                experiment.add(job, args=refused)
        experiment.add(xm.Job(exe, fake.FakeExecutor()), args={"args": at_limit})
    units = open_store().work_units(experiment.experiment_id)
    assert len(units) == 1 and units[0].status is not None
