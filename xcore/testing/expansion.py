"""The ``$(NAME)`` expansion Kubernetes applies to a container's ``command``, ``args`` and env
``value``s before it starts the container (its third_party/forked/golang/expansion), and that
Vertex AI documents for env values: for the fakes of backends built on it (xk8s's kubelet,
xgcp's Vertex) and the tests that check what a program will receive.

- ``$(NAME)`` becomes the value of ``NAME`` when the container defines it, else stays as written;
- ``$$`` becomes ``$`` (so ``$$(NAME)`` is the text ``$(NAME)``);
- any other ``$`` is kept: one before another character, a ``$(`` with no ``)`` after it (the
  rest is still read for references), and a trailing ``$``.

What a reference can see: an env value the entries listed before it (values are expanded as
they are defined; downward API and Secret values are not expanded), ``command`` and ``args``
the container's whole env. The variables a runtime or an image sets (``PATH``, ``HOSTNAME``,
``HOME``) are not the container's: ``$(HOME)`` stays as written.
"""

from __future__ import annotations

from collections.abc import Mapping


def expand(text: str, defined: Mapping[str, str]) -> str:
    """``text`` as the kubelet passes it on, the container's variables being ``defined``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        after = text[i + 1]
        if after == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2:end]
            out.append(defined[name] if name in defined else f"$({name})")
            i = end + 1
        else:  # "$$" is one "$"; "$(" without ")" and "$x" are kept, and reading goes on after them
            out.append("$" if after == "$" else "$" + after)
            i += 2
    return "".join(out)
