"""Bazel targets as executables (XManager's ``BazelBinary``/``BazelContainer`` and their
``bazel_binary``/``bazel_container`` helpers), built with the ``bazel`` on PATH.

Backends call ``build`` while packaging: one ``bazel build`` run in the workspace (the
launch script's directory or the nearest parent with a WORKSPACE/MODULE.bazel file), its
outputs read from Bazel's build event protocol file, so no output path is guessed.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from xcore.errors import PackagingError
from xcore.model import datamodel
from xcore.model.args import UserArgs
from xcore.model.executables import BinaryDependency, name_from_path, to_tuple
from xcore.model.job_blocks import ExecutableSpec, ExecutorSpec, Packageable

WORKSPACE_FILES = ("MODULE.bazel", "WORKSPACE", "WORKSPACE.bazel")


def name_from_label(label: str) -> str:
    """A target's executable name, as XManager derives it: ``//path/to:train`` -> ``to_train``,
    ``:binary`` -> ``_binary`` (see ``name_from_path``)."""
    return name_from_path(label)


@datamodel.frozen
class BazelBinary(ExecutableSpec):
    """A Bazel target that builds a self-contained executable."""

    label: str
    dependencies: tuple[BinaryDependency, ...] = attrs.field(default=(), converter=to_tuple)
    bazel_args: tuple[str, ...] = attrs.field(default=(), converter=to_tuple)

    @property
    def name(self) -> str:
        return name_from_label(self.label)


@datamodel.frozen
class BazelContainer(ExecutableSpec):
    """A Bazel target that builds an image tarball (``docker load`` format), e.g. a
    ``rules_oci``/``rules_docker`` target whose label ends in ``.tar``."""

    label: str
    bazel_args: tuple[str, ...] = attrs.field(default=(), converter=to_tuple)

    @property
    def name(self) -> str:
        return name_from_label(self.label)


def bazel_binary(
    executor_spec: ExecutorSpec,
    label: str,
    dependencies: Sequence[BinaryDependency] = (),
    bazel_args: Sequence[str] = (),
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """A Bazel target that produces a self-contained binary."""
    return Packageable(BazelBinary(label, tuple(dependencies), tuple(bazel_args)),
                       executor_spec, args, env_vars)


def bazel_container(
    executor_spec: ExecutorSpec,
    label: str,
    bazel_args: Sequence[str] = (),
    *,
    args: UserArgs = None,
    env_vars: Mapping[str, Any] | None = None,
) -> Packageable:
    """A Bazel target that produces an image tarball."""
    return Packageable(BazelContainer(label, tuple(bazel_args)),
                       executor_spec, args, env_vars)


# -- building --------------------------------------------------------------------------------


def bazel_path() -> str | None:
    """The Bazel to run: ``XCORE_BAZEL`` (a path or a name on PATH), else ``bazel``."""
    import shutil  # here: shutil and tempfile cost every launch a few ms, Bazel or not

    return shutil.which(os.environ.get("XCORE_BAZEL", "bazel"))


def find_workspace(start: Path | None = None) -> Path:
    """The Bazel workspace holding ``start`` (default: the launch script's directory, else
    the working directory). ``XCORE_BAZEL_WORKSPACE`` overrides."""
    from xcore import paths

    override = os.environ.get("XCORE_BAZEL_WORKSPACE")
    if override:
        return Path(override).expanduser().resolve()
    here = (start or paths.launch_dir() or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if any((directory / name).is_file() for name in WORKSPACE_FILES):
            return directory
    raise PackagingError(
        f"No Bazel workspace around {here}: none of {', '.join(WORKSPACE_FILES)} found there or above. "
        "Launch from inside the workspace or set XCORE_BAZEL_WORKSPACE."
    )


def build_command(labels: Sequence[str], bazel_args: Sequence[str], events_file: str, bazel: str = "bazel",
                  startup_args: Sequence[str] = ()) -> list[str]:
    """The argv of one ``bazel build`` for ``labels`` that records its outputs in ``events_file``."""
    return [bazel, *startup_args, "build", f"--build_event_json_file={events_file}", *bazel_args, "--", *labels]


def startup_args() -> list[str]:
    """Bazel startup options from ``XCORE_BAZEL_STARTUP_ARGS`` (shell words), e.g.
    ``--output_user_root=/scratch/bazel --max_idle_secs=600``."""
    import shlex

    return shlex.split(os.environ.get("XCORE_BAZEL_STARTUP_ARGS", ""))


def outputs_from_events(lines: Sequence[str]) -> dict[str, list[str]]:
    """Each built label's output files, from Bazel's build event JSON (one event per line)."""
    file_sets: dict[str, dict[str, Any]] = {}
    completed: dict[str, list[str]] = {}
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        ident = event.get("id", {})
        if "namedSet" in ident:
            file_sets[ident["namedSet"]["id"]] = event.get("namedSetOfFiles", {})
        elif "targetCompleted" in ident and event.get("completed", {}).get("success", False) is not False:
            groups = event.get("completed", {}).get("outputGroup", [])
            completed[ident["targetCompleted"]["label"]] = [
                s["id"] for g in groups if g.get("name", "default") == "default" for s in g.get("fileSets", [])
            ]

    def files(set_id: str, seen: set[str]) -> list[str]:
        if set_id in seen or set_id not in file_sets:
            return []
        seen.add(set_id)
        entry = file_sets[set_id]
        found = [_uri_path(f["uri"]) for f in entry.get("files", []) if "uri" in f]
        for nested in entry.get("fileSets", []):
            found += files(nested["id"], seen)
        return found

    return {label: [p for s in sets for p in files(s, set())] for label, sets in completed.items()}


def _uri_path(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _canonical(label: str) -> str:
    """Bazel reports ``//pkg:name`` for ``//pkg`` and ``@//pkg:name``-less forms; compare on that."""
    label = label.removeprefix("@")
    if label.startswith("//") and ":" not in label:
        label = f"{label}:{label.rsplit('/', 1)[-1]}"
    return label


def build(labels: Sequence[str], bazel_args: Sequence[str] = (), workspace: Path | None = None,
          progress: Any = None) -> dict[str, list[str]]:
    """Build ``labels`` in one ``bazel build``; return each label's output files."""
    bazel = bazel_path()
    if bazel is None:
        raise PackagingError(
            "Bazel targets need `bazel` on PATH (install Bazel or bazelisk, or set XCORE_BAZEL to its path)."
        )
    workspace = workspace or find_workspace()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xcore-bazel-") as tmp:
        events = os.path.join(tmp, "events.json")
        command = build_command(labels, bazel_args, events, bazel, startup_args())
        if progress is not None:
            progress.update("bazel build", detail=" ".join(labels))
        done = subprocess.run(command, cwd=workspace, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            raise PackagingError(
                f"`bazel build {' '.join(labels)}` failed in {workspace} (exit {done.returncode}):\n{tail}")
        lines = Path(events).read_text(encoding="utf-8").splitlines() if os.path.exists(events) else []
    outputs = {_canonical(k): v for k, v in outputs_from_events(lines).items()}
    result = {}
    for label in labels:
        found = outputs.get(_canonical(label))
        if not found:
            raise PackagingError(f"`bazel build {label}` reported no output files; is it a buildable target?")
        result[label] = [f if os.path.isabs(f) else str(workspace / f) for f in found]
    return result


def single_output(label: str, files: Sequence[str], kind: str) -> str:
    """The one file a target built (a binary or an image tarball)."""
    if len(files) == 1:
        return files[0]
    if kind == "container":
        tars = [f for f in files if f.endswith(".tar")]
        if len(tars) == 1:
            return tars[0]
    raise PackagingError(
        f"Bazel target {label} built {len(files)} files ({', '.join(os.path.basename(f) for f in files[:5])}); "
        f"a {kind} target must build exactly one."
    )


# The names under which ``xcore.plugin`` exports these helpers to plugins.
bazel_workspace = find_workspace
bazel_build = build
bazel_output = single_output
