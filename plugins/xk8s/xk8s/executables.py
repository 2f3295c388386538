"""What xk8s runs: an image and, when known, the program's full command.

``xm.container(IMAGE)`` runs the image's own entrypoint with the job's args (one Job per
distinct argv). ``xk8s.image(IMAGE, command=[...])`` also names the program, which lets a
sweep run as one Indexed Job (the entrypoint execs ``command + args`` of each trial).
"""

from __future__ import annotations

import attrs

from xcore import plugin as xp


@attrs.frozen
class Image(xp.ExecutableSpec):
    """An existing image and the command that starts the program in it."""

    image: str
    command: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    @property
    def name(self) -> str:
        return self.image.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]


def image(image: str, command: list[str] | tuple[str, ...] = (), *, args=None, env_vars=None,
          spec: xp.ExecutorSpec | None = None) -> xp.Packageable:
    """A packageable for ``experiment.package``: ``xk8s.image("ghcr.io/lab/train:1", ["python3", "-m", "train"])``."""
    from xk8s.executors import KubernetesSpec

    # mypy's attrs plugin mistypes converter=tuple fields (as in xcore/model/packagables.py)
    return xp.Packageable(executable_spec=Image(image, tuple(command)),  # type: ignore[arg-type]
                          executor_spec=spec or KubernetesSpec(),
                          args=args or [], env_vars=env_vars or {})


@attrs.define(kw_only=True)
class KubernetesExecutable(xp.Executable):
    image: str
    command: list[str] = attrs.field(factory=list)
