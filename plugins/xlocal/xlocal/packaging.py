"""Packaging for ``Local``: binaries and Python modules need no build, only checks."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from xcore.errors import PackagingError
from xcore.executables import Binary, PythonModule
from xcore.job_blocks import Packageable

from xlocal.executables import LocalProcess


def package_binary(packageable: Packageable, spec: Binary) -> LocalProcess:
    path = Path(spec.path).expanduser()
    if os.sep in spec.path or path.exists():
        resolved = path.resolve()
        if not resolved.is_file():
            raise PackagingError(
                f"Binary {spec.path!r} does not exist (looked at {resolved}). Check the path in xm.binary(...); "
                "relative paths are taken from the directory you launch from."
            )
        if not os.access(resolved, os.X_OK):
            raise PackagingError(f"Binary {resolved} is not executable: run `chmod +x {resolved}` or call it through an interpreter.")
        command = str(resolved)
    else:
        found = shutil.which(spec.path)
        if found is None:
            raise PackagingError(f"Binary {spec.path!r} is not a file and is not found on PATH ({os.environ.get('PATH', '')}).")
        command = found
    return LocalProcess(name=spec.name, command=[command], args=packageable.args, env_vars=packageable.env_vars)


def package_python_module(packageable: Packageable, spec: PythonModule) -> LocalProcess:
    project = Path(spec.path).expanduser().resolve()
    if not project.is_dir():
        raise PackagingError(f"python_module(path={spec.path!r}): {project} is not a directory.")
    top = spec.module.split(".")[0]
    if not ((project / top).is_dir() or (project / f"{top}.py").is_file()):
        raise PackagingError(
            f"python_module({spec.module!r}): neither {project / top}/ nor {project / (top + '.py')} exists. "
            "Set path= to the directory that contains the module."
        )
    python = spec.python or sys.executable
    env = dict(packageable.env_vars)
    env["PYTHONPATH"] = str(project) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return LocalProcess(name=spec.name, command=[python, "-m", spec.module], args=packageable.args, env_vars=env)
