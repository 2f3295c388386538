"""The plugin contract suite: every check an executor must pass, as a pytest plugin.

Point it at your executor with one fixture and one class::

    # tests/test_contract.py
    import pytest
    from xcore.testing.contract import ContractSuite, ContractTarget
    import myplugin

    @pytest.fixture
    def xcore_contract_target():
        return ContractTarget(executor_spec=myplugin.My.Spec(), executor=myplugin.My)

    class TestMyExecutor(ContractSuite):
        pass

The suite runs the real core end to end in a private ``XCORE_HOME``: it packages a probe
program with ``xm.python_module``, launches it through ``xm.create_experiment``, and reads
status, logs and cancellation back through the core, in this process and in a fresh one.
A check that cannot apply to a backend is *skipped with the reason the target gives*, never
silently: see ``ContractTarget``.

The module is also registered as a pytest plugin (entry point ``pytest11: xcore-contract``)
that provides the kit fixtures ``xcore_fake_target`` (the fake backend as a target),
``xcore_memory_store`` and ``xcore_silent_progress``. So do not list it in ``pytest_plugins``
(pytest refuses a plugin registered twice, and that alone runs no check): the class above is
the whole recipe. ``xcore plugin new`` generates it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from xcore.model.execution import JobHandle
from xcore.model.job_blocks import Executor, ExecutorSpec, Packageable
from xcore.model.status import Status

PROBE_MODULE = "xcore_contract_probe"

#: Arguments that break naive shell quoting; they must reach the program unchanged.
#: ``$(XCORE_PROBE_ENV)`` names a variable the job defines and ``$$`` is an escape where a backend
#: expands ``$(NAME)`` itself (Kubernetes, Vertex env values): both must arrive as written too.
HOSTILE_ARGS = ["it's", 'say "hi"', "$HOME", "${PATH}", "`id`", "$(id)", "a\nb", "tab\there", "back\\slash",
                "", " lead and trail ", "日本語 🎉 é", "--flag=x y", "*", ";", "|", "&&", "'", '"',
                "$(XCORE_PROBE_ENV)", "$$", "$$(id)", "cost 5$"]
HOSTILE_ENV = "line1\nline2 $HOME `id` 'q' \"dq\" 日本 \\ $(HOME) $$ a$"

#: Written by the probe in pieces that split multi-byte characters.
MULTIBYTE_TEXT = "héllo ✓ 日本語 🎉 ünïcödé\n" * 3 + "last line ✓\n"

PROBE_SOURCE = textwrap.dedent('''
    """The contract suite's probe: does what its first argument says."""
    import json, os, signal, sys, time

    command, rest = sys.argv[1], sys.argv[2:]
    if command == "echo":
        print("XCORE-PROBE " + json.dumps({"argv": rest, "env": os.environ.get("XCORE_PROBE_ENV")}), flush=True)
    elif command == "text":
        data = os.environ["XCORE_PROBE_TEXT"].encode("utf-8")
        for i in range(0, len(data), 3):  # 3-byte pieces split the 2- and 4-byte characters
            sys.stdout.buffer.write(data[i:i + 3])
            sys.stdout.buffer.flush()
            time.sleep(0.002)
    elif command == "exit":
        print("exiting with", rest[0], flush=True)
        sys.exit(int(rest[0]))
    elif command == "kill":
        print("killing myself", flush=True)
        os.kill(os.getpid(), getattr(signal, rest[0]))
        time.sleep(10)
    elif command == "sleep":
        print("sleeping", flush=True)
        time.sleep(float(rest[0]))
''')


@attrs.define(kw_only=True)
class ContractTarget:
    """What the suite needs to know about an executor.

    - ``executor_spec``: the spec ``xm.python_module`` packages for.
    - ``executor``: makes a fresh executor for a job.
    - ``held_executor``: makes an executor whose jobs stay active until cancelled (for
      backends that can hold jobs, like the fake); default: ``executor`` running a probe that
      sleeps for ``timeout_secs``.
    - ``forget``: given the handle of a finished job, makes the backend lose every trace of it,
      as a scheduler purging old accounting or a user deleting state would (delete its record,
      its state directory); the job must then read FAILED ``lost: ...`` without an exit code.
      None: the forgotten-job check is skipped with ``forget_skip_reason``.
    - ``plugins``: ``{name: module path}`` of plugins to register that have no installed entry
      point (the fake backend); they are registered in this process and in fresh processes.
    - ``package``: builds the probe's packageable from the probe project's directory and the
      probe's module name, for backends that cannot run ``xm.python_module`` as is (a
      container backend: ``xm.python_container(spec, xm.ModuleName(module), path=..., base_image=...)``).
      Default: ``xm.python_module(executor_spec, module, path=...)``.
    - ``timeout_secs``: how long a job may take to finish or to be cancelled.
    - ``expect_signal_exit``: False skips the signal-exit check (a backend that cannot report
      how a job died), with ``signal_skip_reason``.
    - ``cancel_skip_reason``: non-empty skips the running-job cancel check with this reason
      (a backend whose jobs end while they are launched has nothing to cancel).
    """

    executor_spec: ExecutorSpec
    executor: Callable[[], Executor]
    held_executor: Callable[[], Executor] | None = None
    forget: Callable[[JobHandle], None] | None = None
    forget_skip_reason: str = "the target gives no way to make the backend forget a job (ContractTarget.forget)"
    plugins: Mapping[str, str] = attrs.field(factory=dict)
    package: Callable[[Path, str], Packageable] | None = None
    timeout_secs: float = 60.0
    expect_signal_exit: bool = True
    signal_skip_reason: str = "the target says it cannot report signals (expect_signal_exit=False)"
    cancel_skip_reason: str = ""


@attrs.define
class ContractRun:
    """One launched experiment, as the suite sees it."""

    experiment_id: int
    home: Path
    target: ContractTarget

    def env(self) -> dict[str, str]:
        return {**os.environ, "XCORE_HOME": str(self.home), "XCORE_QUIET": "1"}

    def fresh(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``xcore ARGS`` in a new process, with the target's extra plugins registered."""
        script = (
            "import importlib, sys\n"
            "from xcore.hooks.host import PluginHost, reset_host\n"
            "host = PluginHost()\n"
            f"for name, module in {dict(self.target.plugins)!r}.items():\n"
            "    host.register(importlib.import_module(module), name)\n"
            "reset_host(host)\n"
            "from xcore.cli.main import main\n"
            "sys.exit(main(sys.argv[1:]))\n"
        )
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                              env=self.env(), timeout=timeout or self.target.timeout_secs + 30, check=False)

    def jobs(self) -> list[Any]:
        from xcore.launch.registry import open_store

        return [job for unit in open_store().work_units(self.experiment_id) for job in unit.jobs]

    def handle(self, index: int = 0) -> JobHandle:
        from xcore.hooks.host import get_host

        job = self.jobs()[index]
        assert job.handle is not None, f"job {job.id} has no handle: {job.status} {job.message}"
        return get_host().serializer.load(job.handle)

    def wait(self, timeout: float | None = None) -> list[Any]:
        from xcore.launch.registry import get_experiment

        get_experiment(self.experiment_id).wait_until_complete(timeout=timeout or self.target.timeout_secs)
        return self.jobs()

    def logs(self, index: int = 0, follow: bool = False) -> str:
        from xcore.hooks.host import get_host

        job = self.jobs()[index]
        return "".join(get_host().job_logs(job.handle_kind, self.handle(index), follow))


class ContractSuite:
    """Subclass it in a test module and provide an ``xcore_contract_target`` fixture."""

    # -- fixtures ------------------------------------------------------------------------

    @pytest.fixture
    def contract_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      xcore_contract_target: ContractTarget) -> Iterator[Path]:
        from xcore.testing.builders import plugin_host

        home = tmp_path / "xcore-home"
        monkeypatch.setenv("XCORE_HOME", str(home))
        monkeypatch.setenv("XCORE_QUIET", "1")
        monkeypatch.delenv("XCORE_STORE", raising=False)
        plugin_host(dict(xcore_contract_target.plugins), entry_points=True)
        yield home
        from xcore.hooks.host import reset_host

        reset_host()

    @pytest.fixture
    def probe(self, tmp_path: Path) -> Path:
        project = tmp_path / "probe-project"
        (project / PROBE_MODULE).mkdir(parents=True)
        (project / PROBE_MODULE / "__init__.py").write_text("")
        (project / PROBE_MODULE / "__main__.py").write_text(PROBE_SOURCE)
        return project

    @pytest.fixture
    def launch(self, contract_home: Path, probe: Path,
               xcore_contract_target: ContractTarget) -> Iterator[Callable[..., ContractRun]]:
        """``launch([argv, ...], env=..., held=False)`` runs one work unit per argv list.

        Jobs a check leaves active (it failed or timed out) are cancelled afterwards, so a
        shared cluster is not left running or queueing them."""
        import xcore as xm

        runs: list[ContractRun] = []

        def run(argvs: list[list[str]], env: Mapping[str, str] | None = None, held: bool = False) -> ContractRun:
            target = xcore_contract_target
            with xm.create_experiment("contract") as experiment:
                [exe] = experiment.package([self.packageable(target, probe)])
                for argv in argvs:
                    executor = target.held_executor() if held and target.held_executor else target.executor()
                    experiment.add(xm.Job(exe, executor, args=list(argv), env_vars=dict(env or {})))
            runs.append(ContractRun(experiment.experiment_id, contract_home, xcore_contract_target))
            return runs[-1]

        yield run
        from xcore.hooks.host import get_host
        from xcore.launch.registry import open_store
        from xcore.runtime.tracking import cancel_jobs

        for launched in runs:
            try:
                active = [job for job in launched.jobs() if job.handle is not None and not job.status.is_terminal]
                if active:
                    cancel_jobs(open_store(), get_host(), active)
            except Exception as exc:  # cleanup only: the check's own result stands
                print(f"xcore contract: could not cancel what experiment {launched.experiment_id} left: {exc}")

    @staticmethod
    def packageable(target: ContractTarget, probe: Path, **defaults: Any) -> Packageable:
        import attrs as _attrs

        import xcore as xm

        if target.package is None:
            return xm.python_module(target.executor_spec, PROBE_MODULE, path=str(probe), **defaults)
        return _attrs.evolve(target.package(probe, PROBE_MODULE), **defaults)

    # -- the checks ----------------------------------------------------------------------

    def test_package_python_module(self, contract_home: Path, probe: Path,
                                   xcore_contract_target: ContractTarget) -> None:
        """The probe (``xm.python_module``, or ``ContractTarget.package``) packages for the executor
        spec; the core attaches the packageable's default args and env."""
        import xcore as xm
        from xcore.hooks.host import get_host
        from xcore.runtime.packaging import package

        packageable = self.packageable(xcore_contract_target, probe, args=["echo", "default"],
                                       env_vars={"XCORE_PROBE_ENV": "from packaging"})
        [executable] = package([packageable])
        assert isinstance(executable, xm.Executable)
        kind = get_host().kinds.kind_of(executable)
        assert get_host().kinds.owner(kind) != "xcore", "the packaged executable must be the plugin's own kind"
        assert executable.args.to_list() == ["echo", "default"]
        assert executable.env_vars["XCORE_PROBE_ENV"] == "from packaging"

    def test_launch_a_batch(self, launch: Callable[..., ContractRun]) -> None:
        """A burst of jobs: each gets a handle; success and failure read by the exit-code rule."""
        run = launch([["echo", "one"], ["exit", "3"], ["echo", "three"]])
        jobs = run.wait()
        assert [(j.status, j.exit_code) for j in jobs] == [
            (Status.COMPLETED, 0), (Status.FAILED, 3), (Status.COMPLETED, 0)], [j.message for j in jobs]
        assert jobs[1].message == "exit code 3"
        assert all(j.handle is not None for j in jobs)

    def test_failures_name_a_class(self, launch: Callable[..., ContractRun]) -> None:
        """A failed job's state names its failure class (``JobState.failure``: one of
        ``FAILURE_CLASSES``, or None, which reads ``error``); an attempt is counted from 1."""
        from xcore.hooks.host import get_host
        from xcore.model.status import FAILURE_CLASSES

        [job] = launch([["exit", "3"]]).wait()
        host = get_host()
        [state] = host.job_states(job.handle_kind or "", [host.serializer.load(job.handle)])
        assert state.status is Status.FAILED and state.failure in (None, *FAILURE_CLASSES), state
        assert state.attempt is None or state.attempt >= 1, state
        assert all(a.number >= 1 and (a.failure in (None, *FAILURE_CLASSES)) for a in state.previous_attempts), state

    def test_signal_exit_code_convention(self, launch: Callable[..., ContractRun],
                                         xcore_contract_target: ContractTarget) -> None:
        """A job killed by signal N reads FAILED, exit code 128+N, 'killed by signal N (SIGNAME)'."""
        if not xcore_contract_target.expect_signal_exit:
            pytest.skip(xcore_contract_target.signal_skip_reason)
        [job] = launch([["kill", "SIGKILL"]]).wait()
        assert (job.status, job.exit_code) == (Status.FAILED, 128 + signal.SIGKILL), job.message
        assert job.message == "killed by signal 9 (SIGKILL)"

    def test_status_from_a_fresh_process(self, launch: Callable[..., ContractRun]) -> None:
        """Status comes from the backend in a process that did not launch the jobs."""
        run = launch([["echo", "fresh"], ["exit", "4"]])
        result = run.fresh("wait", str(run.experiment_id), "--json")
        assert result.returncode == 1, result.stderr  # one job failed
        jobs = json.loads(result.stdout)["jobs"]
        assert sorted((j["status"], j["exit_code"]) for j in jobs) == [("COMPLETED", 0), ("FAILED", 4)], result.stdout

    def test_logs_are_text_decoded_across_reads(self, launch: Callable[..., ContractRun]) -> None:
        """Multi-byte output comes back exactly, following and not, here and in a fresh process."""
        run = launch([["text"]], env={"XCORE_PROBE_TEXT": MULTIBYTE_TEXT})
        followed = run.logs(follow=True)
        assert followed == MULTIBYTE_TEXT
        run.wait()
        assert run.logs(follow=False) == MULTIBYTE_TEXT
        fresh = run.fresh("logs", f"{run.experiment_id}/1")
        assert fresh.returncode == 0, fresh.stderr
        assert fresh.stdout == MULTIBYTE_TEXT

    def test_cancel_a_running_job(self, launch: Callable[..., ContractRun],
                                  xcore_contract_target: ContractTarget) -> None:
        """Cancel from a fresh process returns within the timeout, the job reads CANCELLED, and
        cancelling again is harmless."""
        target = xcore_contract_target
        if target.cancel_skip_reason:
            pytest.skip(target.cancel_skip_reason)
        run = launch([["sleep", str(target.timeout_secs * 2)]], held=True)
        [job] = run.jobs()
        assert job.status.is_active, (job.status, job.message)
        started = time.monotonic()
        result = run.fresh("cancel", str(run.experiment_id))
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < target.timeout_secs, "cancel blocked too long"
        [job] = run.wait()
        assert job.status is Status.CANCELLED, (job.status, job.message)
        assert run.fresh("cancel", str(run.experiment_id)).returncode == 0

    def test_cancel_leaves_a_finished_job_as_it_is(self, launch: Callable[..., ContractRun]) -> None:
        """Cancelling a job that already ended changes nothing."""
        run = launch([["echo", "finished first"]])
        run.wait()
        result = run.fresh("cancel", str(run.experiment_id))
        assert result.returncode == 0, result.stderr
        [job] = run.jobs()
        assert (job.status, job.exit_code) == (Status.COMPLETED, 0)
        state = run.fresh("show", str(run.experiment_id), "--json")
        assert json.loads(state.stdout)["work_units"][0]["status"] == "COMPLETED"

    def test_forgotten_job(self, launch: Callable[..., ContractRun], xcore_contract_target: ContractTarget) -> None:
        """A job the backend no longer knows reads FAILED, 'lost: ...', without an exit code."""
        target = xcore_contract_target
        if target.forget is None:
            pytest.skip(target.forget_skip_reason)
        run = launch([["echo", "soon forgotten"]])
        [job] = run.jobs()
        assert not job.status.is_terminal, "the core must not know the outcome before it asks the backend"
        target.forget(run.handle())
        result = run.fresh("wait", str(run.experiment_id), "--json", "--timeout", str(target.timeout_secs))
        assert result.stdout, result.stderr
        [job] = json.loads(result.stdout)["jobs"]
        assert (job["status"], job["exit_code"]) == ("FAILED", None), job
        assert job["message"].startswith("lost: "), job["message"]

    def test_hostile_arguments_round_trip(self, launch: Callable[..., ContractRun]) -> None:
        """Quotes, $, backticks, newlines, unicode and empty strings reach the program unchanged."""
        run = launch([["echo", *HOSTILE_ARGS]], env={"XCORE_PROBE_ENV": HOSTILE_ENV})
        [job] = run.wait()
        assert job.status is Status.COMPLETED, job.message
        line = next(line for line in run.logs().splitlines() if line.startswith("XCORE-PROBE "))
        received = json.loads(line.removeprefix("XCORE-PROBE "))
        assert received == {"argv": HOSTILE_ARGS, "env": HOSTILE_ENV}

    def test_handle_serialization_round_trip(self, launch: Callable[..., ContractRun]) -> None:
        """A handle is a registered attrs class that survives JSON and loads back equal."""
        from xcore.hooks.host import get_host

        run = launch([["echo", "handle"]])
        [job] = run.jobs()
        host = get_host()
        handle = host.serializer.load(json.loads(json.dumps(job.handle)))
        assert isinstance(handle, JobHandle)
        assert host.serializer.dump(handle) == job.handle
        assert host.kinds.kind_of(handle) == job.handle_kind
        assert handle.log_path is None or isinstance(handle.log_path, str)
        assert job.log_path == handle.log_path
        assert not handle.error


# -- kit fixtures (this module is a pytest plugin) ------------------------------------------


@pytest.fixture
def xcore_fake_target() -> ContractTarget:
    """The fake backend (``xcore.testing.fake``) as a contract target."""
    from xcore.testing import fake

    return ContractTarget(executor_spec=fake.FakeSpec(), executor=fake.FakeExecutor,
                          held_executor=lambda: fake.FakeExecutor(hold=True), forget=fake.forget,
                          plugins={"fake": "xcore.testing.fake"}, timeout_secs=30)


@pytest.fixture
def xcore_memory_store() -> Any:
    """A fresh ``InMemoryStore``."""
    from xcore.testing.memory_store import InMemoryStore

    return InMemoryStore()


@pytest.fixture
def xcore_silent_progress() -> Any:
    """A ``Progress`` that prints nothing."""
    from xcore.testing.builders import silent_progress

    return silent_progress()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "xcore_contract: a check of the xcore plugin contract suite")
