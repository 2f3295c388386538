"""The SQL every dialect runs word for word, with ``?`` placeholders (a dialect whose driver
takes another, such as psycopg's ``%s``, translates them): written once here, so every store
writes the same rows the same way.

What differs between databases (id allocation, row locking, ``IN`` lists, aggregates) is asked
of the dialect (``xcore.store.dialect``). The values the statements take are built in
``xcore.store.rows``.
"""

from __future__ import annotations

from xcore.model.status import COMBINE_ORDER


def unit_status(column: str) -> str:
    """SQL aggregating the statuses in ``column`` of a work unit's jobs into the unit's status:
    what ``xcore.model.status.combine`` gives (``rows.unit_statuses`` in Python), LAUNCHING for none."""
    ranks = " ".join(f"WHEN '{s.value}' THEN {rank}" for rank, s in enumerate(COMBINE_ORDER))
    names = " ".join(f"WHEN {rank} THEN '{s.value}'" for rank, s in enumerate(COMBINE_ORDER))
    return (f"CASE WHEN COUNT(*) = 0 THEN 'LAUNCHING' WHEN MIN({column}) = MAX({column}) THEN MIN({column})"
            f" ELSE CASE MIN(CASE {column} {ranks} ELSE {len(COMBINE_ORDER)} END) {names} ELSE 'COMPLETED' END END")


# -- recording adds (``record_adds``, ``add_work_unit``, ``add_jobs``)
INSERT_UNIT = "INSERT INTO work_units (experiment_id, id, role, args, identity, created_at) VALUES (?,?,?,?,?,?)"
INSERT_JOBS = ("INSERT INTO jobs (id, experiment_id, work_unit_id, name, executor_kind, executor_spec,"
               " executable_spec, args, env, created_at, lease_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)")
INSERT_JOB = ("INSERT INTO jobs (experiment_id, work_unit_id, name, executor_kind, executor_spec, executable_spec,"
              " args, env, created_at, lease_id) VALUES (?,?,?,?,?,?,?,?,?,?)")
LAUNCHING_EVENT = "INSERT INTO job_events (job_id, status, at) VALUES (?, 'LAUNCHING', ?)"
ADDED_EVENTS = "INSERT INTO job_events (job_id, status, at) SELECT id, 'LAUNCHING', ? FROM jobs WHERE {} ORDER BY id"
UNIT_LAUNCHING = "UPDATE work_units SET status = 'LAUNCHING' WHERE experiment_id = ? AND id = ?"
_NEWER_URL = " ON CONFLICT (job_id, name) DO UPDATE SET url = excluded.url"
UPSERT_LINK = f"INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url) VALUES (?,?,?,?,?){_NEWER_URL}"
# -- the backend's answers (``mark_launched``, ``record_states``): a job still LAUNCHING becomes
# PENDING once (marking twice appends nothing); ``{}`` is a dialect's ``IN`` list of job ids
LAUNCHED_EVENTS = ("INSERT INTO job_events (job_id, status, message, at) SELECT id, 'PENDING', 'submitted', ?"
                   " FROM jobs WHERE {} AND status = 'LAUNCHING' ORDER BY id")
MARK_LAUNCHED = (
    "UPDATE jobs SET handle_kind = ?, handle = ?, log_path = ?, launched_at = ?,"
    " status = CASE status WHEN 'LAUNCHING' THEN 'PENDING' ELSE status END,"
    " message = CASE status WHEN 'LAUNCHING' THEN 'submitted' ELSE message END WHERE id = ?")
LAUNCHED_UNITS = (
    f"UPDATE work_units SET status = (SELECT {unit_status('j.status')} FROM jobs j"
    " WHERE j.experiment_id = work_units.experiment_id AND j.work_unit_id = work_units.id)"
    " WHERE (experiment_id, id) IN (SELECT experiment_id, work_unit_id FROM jobs WHERE {})")
RECORD_STATE = ("UPDATE jobs SET status = ?, message = ?, exit_code = ?, started_at = ?, ended_at = ?, failure = ?"
                " WHERE id = ?")
UNIT_STATUSES = ("UPDATE work_units SET status = ? WHERE experiment_id = ? AND id BETWEEN ? AND ?"
                 " AND status <> ?")
INSERT_EVENT = "INSERT INTO job_events (job_id, status, message, exit_code, at) VALUES (?,?,?,?,?)"
CLOSE_INTENT = "DELETE FROM launch_intents WHERE id = ?"
# -- attempts (``job_attempts``: an earlier attempt is written once, never overwritten)
ARCHIVE_ATTEMPT = ("INSERT INTO job_attempts (job_id, number, status, failure, exit_code, started_at, ended_at,"
                   " message, handle_kind, handle, log_path) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                   " ON CONFLICT (job_id, number) DO NOTHING")
NEXT_ATTEMPT = ("UPDATE jobs SET attempt = ?, exit_code = NULL, failure = NULL, started_at = NULL, ended_at = NULL"
                " WHERE id = ?")
RELAUNCH = ("UPDATE jobs SET attempt = ?, status = 'LAUNCHING', message = ?, exit_code = NULL, failure = NULL,"
            " started_at = NULL, ended_at = NULL, handle_kind = NULL, handle = NULL, log_path = NULL,"
            " launched_at = NULL, results_at = NULL, lease_id = ? WHERE id = ? AND attempt = ?")
# -- leases
CLAIM_LEASE = ("UPDATE launch_leases SET state = 'resolving', host = ?, pid = ?, proc_start = ?, heartbeat = ?"
               " WHERE id = ? AND pid = ? AND host = ? AND heartbeat = ?")
LAUNCH_FAILED = ("UPDATE experiments SET launch_status = 'LAUNCH_FAILED', launch_error = ?"
                 " WHERE id = ? AND launch_status = 'LAUNCHING'")
# -- a copied experiment (``import_history``)
INSERT_EXPERIMENT = ('INSERT INTO experiments (id, title, tags, notes, script_path, script_sha256, git_commit,'
                     ' git_dirty, "user", host, created_at, launch_status, launch_error, origin)'
                     " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
COPY_UNIT = ("INSERT INTO work_units (experiment_id, id, role, args, identity, status, created_at)"
             " VALUES (?,?,?,?,?,?,?)")
SET_RESULTS_AT = "UPDATE jobs SET results_at = ? WHERE id = ?"
INSERT_RESULT = "INSERT INTO job_results (job_id, experiment_id, work_unit_id, name, value, at) VALUES (?,?,?,?,?,?)"
# -- results and links of recorded jobs
UPSERT_RESULT = f"{INSERT_RESULT} ON CONFLICT (job_id, name) DO UPDATE SET value = excluded.value, at = excluded.at"
LINK_JOB = ("INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url)"
            f" SELECT id, experiment_id, work_unit_id, ?, ? FROM jobs WHERE id = ?{_NEWER_URL}")
