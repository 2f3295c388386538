"""``xcore retry EXP[/WU]``: run a sweep's failed (cancelled, lost) units again as new attempts."""

from __future__ import annotations

import argparse

from xcore.cli.tables import id_ranges, plural, printable
from xcore.cli.targets import parse_target
from xcore.workspace import current

EXIT_OK, EXIT_REFUSED = 0, 1


def retry(args: argparse.Namespace) -> int:
    from xcore.runtime.rerun import retry as run_retry

    experiment_id, unit_id = parse_target(args.target)
    failed = args.failed or not (args.cancelled or args.lost)
    workspace = current()
    plan = run_retry(workspace.settled_store(), workspace.host, experiment_id,
                     None if unit_id is None else [unit_id], failed=failed, cancelled=args.cancelled,
                     lost=args.lost, dry_run=args.dry_run)
    for why in plan.refused.values():
        print(f"refused: {printable(why)}")
    units = id_ranges(plan.units)
    if args.dry_run:
        print(f"would resubmit {plural(len(plan.jobs), 'job')} of {plural(len(plan.units), 'work unit')}"
              + (f": {units}" if units else ""))
    elif plan.done is not None:
        print(f"resubmitted {plural(len(plan.done.submitted), 'job')} of experiment {experiment_id}"
              + (f" (work units {units})" if units else ""))
        for job_id in plan.done.taken:
            print(f"skipped job {job_id}: another process retried it first")
        for error in plan.done.errors:
            print(f"error: {printable(error)}")
        if plan.done.errors:
            return EXIT_REFUSED
    else:
        print(f"nothing to retry in {printable(args.target)}")
    return EXIT_REFUSED if plan.refused else EXIT_OK
