"""The ``xcore`` command line. Heavy modules load inside each command, so ``--help`` is fast."""

from __future__ import annotations

import argparse
import os
import sys

from xcore import __version__
from xcore.runtime import collector  # light (gc, contextlib): launch turns the collector off before importing more

TYPE_CHECKING = False  # not typing's: importing typing costs every command ~10 ms
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from xcore.hooks.entry_points import EntryPoint

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter without ``shutil`` (which imports bz2 and lzma): same width rule."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        if width is None:
            try:
                width = int(os.environ.get("COLUMNS", "")) or os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (ValueError, OSError, AttributeError):
                width = 80
            width -= 2
        super().__init__(prog, indent_increment, max_help_position, width)


class _RawFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    pass


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        if kwargs.get("formatter_class") in (None, argparse.HelpFormatter):
            kwargs["formatter_class"] = _Formatter
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


class _Unbuilt:
    """Stands for the parser of a command that is not being run: takes its arguments, keeps none."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


class _Commands:
    """The subcommands, each built in full only when it is the command being run (``only``;
    None: all). The others get their name and help alone, all that ``xcore --help`` and an
    unknown command's error show: a command no longer builds the others' arguments."""

    def __init__(self, action: argparse._SubParsersAction, only: str | None) -> None:
        self.action, self.only = action, only

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if self.only is None or name == self.only:
            return self.action.add_parser(name, **kwargs)
        self.action.add_parser(name, help=kwargs.get("help"))
        return _Unbuilt()


def build_parser(with_plugins: bool = True, command: str | None = None) -> argparse.ArgumentParser:
    """The parser. Only ``command``'s arguments are built (``_Commands``). Plugin commands
    declared in metadata are listed without importing their plugin, and not even looked for
    when ``command`` is a core one; only ``command``'s own plugin is imported, and all plugins
    only when ``command`` is neither a core command nor a declared one (a plugin that adds it
    through the hook). ``command=None``: every command in full, all plugins loaded; ``""``:
    the command line names none."""
    parser = _Parser(
        prog="xcore",
        description="Launch and track machine-learning experiments on any compute backend.",
        epilog="Examples:\n  xcore launch examples/sweep/launch.py --wait\n  xcore list\n  xcore show 3\n"
        "  xcore logs 3/7 --follow\n\nState lives in XCORE_HOME (default ~/.local/share/xcore).",
        formatter_class=_RawFormatter,
    )
    parser.add_argument("--version", action="version", version=f"xcore {__version__}")
    action = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub: Any = _Commands(action, command)

    p = sub.add_parser("launch", help="run a launch script",
                       description="Run a launch script; arguments after -- go to the script.")
    p.add_argument("script", help="the launch script (a Python file)")
    p.add_argument("script_args", nargs="*", default=[], metavar="-- ARGS",
                   help="arguments for the script, after --: xcore launch train.py --wait -- --lr=0.1")
    p.add_argument("--wait", action="store_true", help="wait until every work unit ends; exit 1 if any failed")
    p.add_argument("--traceback", action="store_true", help="show the full traceback when the script fails")
    p.set_defaults(func="xcore.cli.commands:launch")

    p = sub.add_parser("list", help="list experiments, newest first")
    p.add_argument("--status", help="only experiments with this status (RUNNING, COMPLETED, FAILED, ...)")
    p.add_argument("--title", help="only titles containing this text")
    p.add_argument("--tag", help="only experiments with this tag")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--user", help="only experiments launched by this user")
    who.add_argument("--mine", action="store_true", help="only experiments launched by you")
    p.add_argument("--limit", "-n", type=int, default=20, help="how many (default 20; 0 for all)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func="xcore.cli.commands:list_")

    p = sub.add_parser("show", help="show an experiment's work units")
    p.add_argument("experiment", help="experiment id")
    p.add_argument("--sort", help="order by a result or argument, e.g. loss (ascending) or -accuracy (descending)")
    p.add_argument("--top", type=int, help="only the first N work units (after --sort)")
    p.add_argument("--group-by", metavar="ARG[,ARG]",
                   help="one row per group of these arguments (e.g. lr,depth): count, completed/failed and each "
                        "result's mean, std, min, max; --sort -loss orders groups by a result's mean")
    p.add_argument("--where", action="append", metavar="FILTER",
                   help="only the work units a filter selects, e.g. 'lr<=0.1 loss<0.05 status=failed depth in (8,16) "
                        "error~NaN' (terms are ANDed; see docs/results.md)")
    p.add_argument("--columns", metavar="NAME[,NAME]",
                   help="the table's or CSV's columns: arguments, results or id, status, exit_code, duration, "
                        "message, error, name (e.g. lr,loss)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="machine-readable output")
    out.add_argument("--csv", action="store_true", help="the (filtered, grouped) table as CSV")
    p.set_defaults(func="xcore.cli.show:show")

    p = sub.add_parser("wait", help="wait for an experiment to end; exit 0 only if all succeeded")
    p.add_argument("experiment", help="experiment id, or EXP/WU")
    p.add_argument("--timeout", type=float, help="give up after this many seconds (exit 124)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func="xcore.cli.commands:wait")

    p = sub.add_parser("cancel", help="cancel an experiment or one work unit (EXP or EXP/WU)")
    p.add_argument("target", help="EXP or EXP/WU")
    p.set_defaults(func="xcore.cli.commands:cancel")

    p = sub.add_parser("logs", help="print a work unit's output")
    p.add_argument("target", help="EXP/WU")
    p.add_argument("--job", help="which job of a job group (default: all)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the job ends")
    p.add_argument("--attempt", type=int, metavar="K", help="the output of attempt K of a retried job "
                   "(default: the latest)")
    p.set_defaults(func="xcore.cli.commands:logs")

    p = sub.add_parser("shell", help="open a shell (or run one command) inside a running job",
                       description="Open an interactive shell inside a running job's allocation and environment, "
                       "or run the command given after -- there: xcore shell 3/1 -- nvidia-smi. Arguments reach "
                       "the command as typed (never a shell line; ask for one with -- bash -c '...').")
    p.add_argument("target", help="EXP/WU")
    p.add_argument("--job", help="which job of a job group (needed when the unit has several)")
    p.set_defaults(func="xcore.cli.shell:shell", shell_command=None)

    p = sub.add_parser("retry", help="run failed work units again, as new attempts of the same units",
                       description="Resubmit the jobs of an experiment's (or one unit's) failed units with the "
                       "same arguments and executables, as the next attempt of the same units (ids kept), one "
                       "submission per executor kind. Active units are refused.")
    p.add_argument("target", help="EXP or EXP/WU")
    p.add_argument("--failed", action="store_true", help="jobs that failed (the default when no kind is named)")
    p.add_argument("--cancelled", action="store_true", help="jobs that were cancelled")
    p.add_argument("--lost", action="store_true", help="jobs their backend forgot")
    p.add_argument("--dry-run", action="store_true", help="say what would be resubmitted, submit nothing")
    p.set_defaults(func="xcore.cli.retry:retry")

    p = sub.add_parser("watch", help="keep observing every active experiment (relaunches retries)",
                       description="A long-running observer: polls every active experiment, one backend query "
                       "per kind each cycle, and runs the observers' duties (relaunching retries the backend "
                       "cannot drive). Run it in tmux or as a service; Ctrl-C or SIGTERM stops it.")
    p.add_argument("--interval", type=float, default=30.0, metavar="S", help="seconds between cycles (default 30)")
    p.add_argument("--once", action="store_true", help="one cycle, then exit")
    p.set_defaults(func="xcore.cli.watch:watch")

    p = sub.add_parser("ui", help="a local web dashboard of experiments (needs xcore-core[ui])",
                       description="Serve a web dashboard over the metadata store: experiments, work units with "
                       "their results, plots, timelines, logs, cancel.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; other machines reach any other address)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--token", help="require this token (also XCORE_UI_TOKEN); by default a random one is made "
                   "and printed once, in the URL to open")
    p.add_argument("--no-token", action="store_true",
                   help="serve without a token: only for a single-user machine, on a loopback address")
    p.add_argument("--read-only", action="store_true", help="hide cancel: look, don't touch")
    p.add_argument("--poll", type=float, default=3.0, help="seconds between status refreshes (default 3)")
    p.set_defaults(func="xcore.ui.server:run")

    p = sub.add_parser("port", help="rewrite an XManager or lxm3 launch script's imports for xcore",
                       description="Rewrite an XManager or lxm3 launch script's imports for xcore, keeping "
                       "comments and formatting. Prints what changed (a diff on stdout, one line per change on "
                       "stderr) and what could not be mapped; the file is only changed with --write. Exit 1 if "
                       "some name could not be mapped. Needs libcst: pip install 'xcore[port]'.")
    p.add_argument("script", help="the launch script to port")
    p.add_argument("--write", "-w", action="store_true", help="rewrite SCRIPT in place")
    p.add_argument("--output", "-o", help="write the ported script to this file instead")
    p.set_defaults(func="xcore.cli.port:command")

    p = sub.add_parser("plugins", help="list installed plugins")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func="xcore.cli.commands:plugins")

    _add_plugin_authoring(sub)

    from xcore.cli import notifications, store_commands

    notifications.add_parser(sub)

    store_commands.add_parser(sub)

    if with_plugins and not (command and command in action.choices):
        from xcore.hooks.entry_points import declared_commands

        for name, ep in declared_commands().items():
            if name in action.choices:
                continue
            if command is None or name == command:
                _add_declared_command(action, name, ep)
            else:
                action.add_parser(name, help=f"(plugin {ep.distribution}: xcore {name} --help)")
        if command is None or (command and command not in action.choices):  # maybe a plugin's, added by its hook
            from xcore.workspace import current

            current().host.add_commands(action)
    return parser


def _add_declared_command(sub: argparse._SubParsersAction, name: str, ep: EntryPoint) -> None:
    from xcore.errors import PluginLoadError

    try:
        ep.load()(sub)  # type: ignore[operator]
    except Exception as exc:
        raise PluginLoadError(f"Plugin {ep.distribution} {ep.version} failed to add its command {name!r}: "
                              f"{type(exc).__name__}: {exc} (hide it with XCORE_DISABLE_PLUGINS)") from exc


def _add_plugin_authoring(sub: _Commands) -> None:
    """``xcore plugin new``; its module (templates, metadata) loads only when it runs."""
    plugin = sub.add_parser("plugin", help="tools for plugin authors")
    commands = plugin.add_subparsers(dest="plugin_command", metavar="COMMAND")
    plugin.set_defaults(func=lambda args: plugin.print_help() or 2)
    new = commands.add_parser("new", help="generate a new plugin distribution (xcore-NAME/)",
                              description="Generate xcore-NAME/: a working executor, its entry point and "
                              "tests that run the plugin contract suite.")
    new.add_argument("name", help="the plugin's name: its kinds are NAME.*, its package NAME")
    new.add_argument("--dir", default=".", help="where to create xcore-NAME/ (default: here)")
    new.add_argument("--executor", metavar="CLASS", help="the executor's class name, e.g. Tmux (then TmuxSpec, "
                     "TmuxHandle, ...; default: CamelNAMEExecutor)")
    new.set_defaults(func="xcore.cli.plugin_template:new_command")


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is not an option), if any."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _print_plugin_warnings() -> None:
    """Plugins that failed to load, once they were loaded (commands that need none load none)."""
    from xcore.workspace import current

    host = current().built_host()
    if host is not None and host.loaded:
        for warning in host.failure_warnings():
            print(warning, file=sys.stderr)


def _join_negative_sort(argv: list[str]) -> list[str]:
    """``--sort -loss`` means descending loss, not an option ``-loss``: pass it as ``--sort=-loss``."""
    joined: list[str] = []
    for arg in argv:
        if joined and joined[-1] == "--sort" and arg.startswith("-"):
            joined[-1] = f"--sort={arg}"
        else:
            joined.append(arg)
    return joined


def _remembered(find: Any) -> Any:
    """``gettext.find`` remembering its answers. argparse passes each of its strings through
    gettext, which searches the locale directories again every time it finds nothing (four
    failed stats per string here): a third of building the parser, ~3 ms per command."""
    answers: dict[tuple[Any, ...], Any] = {}

    def remembered(domain: str, localedir: str | None = None, languages: Any = None, all: bool = False) -> Any:
        if languages is not None:
            return find(domain, localedir, languages, all)
        key = (domain, localedir, all)
        if key not in answers:
            answers[key] = find(domain, localedir, languages, all)
        return answers[key]

    return remembered


def collect_less_often() -> None:
    """Called by ``launch`` just before the script runs: what xcore imported is frozen and the
    script runs with the sweep's thresholds (``xcore.runtime.collector.script_starting``)."""
    collector.script_starting()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    import gc

    collecting = gc.isenabled()
    if _command_of(argv) == "launch":  # no collection until the script runs: see collect_less_often
        collector.launch_imports()
    import gettext

    find = gettext.find  # restored before the command runs (a launch script may use gettext)
    gettext.find = _remembered(find)
    try:
        parser = build_parser(command=_command_of(argv) or "")
        script_args: list[str] = []
        if _command_of(argv) in ("launch", "shell") and "--" in argv:  # what follows -- is the script's/command's
            split = argv.index("--")
            argv, script_args = argv[:split], argv[split + 1 :]
        argv = _join_negative_sort(argv)
        args, unknown = parser.parse_known_args(argv)
        gettext.find = find
        if unknown:
            hint = {"launch": " Put the launch script's own arguments after --.",
                    "shell": " Put the command after --: xcore shell EXP/WU -- CMD ARGS..."}.get(args.command, "")
            parser.error(f"unrecognized arguments: {' '.join(unknown)}.{hint}")
        if args.command == "launch":
            args.script_args = list(args.script_args) + script_args
        elif args.command == "shell":
            args.shell_command = script_args or None
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        if args.command == "list":  # an empty store answers without the store's code
            from xcore.cli.fast_paths import list_empty_store

            if (code := list_empty_store(args)) is not None:
                return code
        func = args.func
        if isinstance(func, str):
            import importlib

            module, name = func.split(":")
            func = getattr(importlib.import_module(module), name)
        try:
            return int(func(args) or 0)
        finally:
            _print_plugin_warnings()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        from xcore.errors import XcoreError

        if isinstance(exc, XcoreError) and not os.environ.get("XCORE_DEBUG"):
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        raise
    finally:
        gettext.find = find
        if collecting:
            gc.enable()  # launch enabled it already, unless it failed before its script


if __name__ == "__main__":
    sys.exit(main())
