"""The SQL both stores run word for word, but for the driver's placeholder (``?`` for sqlite3,
``%s`` for psycopg): written once here, so the two stores write the same rows the same way.

Only whole statements that are the same in both dialects are here; what differs (id allocation,
row locking, ``IN`` lists against ``= ANY``, the paged and aggregate reads) stays in each store.
The values the statements take are built in ``xcore.store.rows``.
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


class Statements:
    """Each statement as text, with ``mark`` as its placeholder. A store builds one at import."""

    def __init__(self, mark: str) -> None:
        def marks(count: int) -> str:
            return ", ".join([mark] * count)

        m = mark
        # -- recording adds (``record_adds``, ``add_work_unit``, ``add_jobs``)
        self.insert_unit = (
            f"INSERT INTO work_units (experiment_id, id, role, args, identity, created_at) VALUES ({marks(6)})")
        self.insert_jobs = (
            "INSERT INTO jobs (id, experiment_id, work_unit_id, name, executor_kind, executor_spec,"
            f" executable_spec, args, env, created_at, lease_id) VALUES ({marks(11)})")
        self.launching_event = f"INSERT INTO job_events (job_id, status, at) VALUES ({m}, 'LAUNCHING', {m})"
        self.unit_launching = f"UPDATE work_units SET status = 'LAUNCHING' WHERE experiment_id = {m} AND id = {m}"
        self.upsert_link = (
            f"INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url) VALUES ({marks(5)})"
            " ON CONFLICT (job_id, name) DO UPDATE SET url = excluded.url")
        # -- the backend's answers (``mark_launched``, ``record_states``): a job still LAUNCHING
        # becomes PENDING once (marking twice appends nothing)
        self.mark_launched = (
            f"UPDATE jobs SET handle_kind = {m}, handle = {m}, log_path = {m}, launched_at = {m},"
            " status = CASE status WHEN 'LAUNCHING' THEN 'PENDING' ELSE status END,"
            f" message = CASE status WHEN 'LAUNCHING' THEN 'submitted' ELSE message END WHERE id = {m}")
        self.submitted_event = (
            f"INSERT INTO job_events (job_id, status, message, at) VALUES ({m}, 'PENDING', 'submitted', {m})")
        self.record_state = (
            f"UPDATE jobs SET status = {m}, message = {m}, exit_code = {m}, started_at = {m}, ended_at = {m}"
            f" WHERE id = {m}")
        self.insert_event = (
            f"INSERT INTO job_events (job_id, status, message, exit_code, at) VALUES ({marks(5)})")
        self.close_intent = f"DELETE FROM launch_intents WHERE id = {m}"
        # -- leases
        self.claim_lease = (
            f"UPDATE launch_leases SET state = 'resolving', host = {m}, pid = {m}, proc_start = {m}, heartbeat = {m}"
            f" WHERE id = {m} AND pid = {m} AND host = {m} AND heartbeat = {m}")
        self.launch_failed = (
            f"UPDATE experiments SET launch_status = 'LAUNCH_FAILED', launch_error = {m}"
            f" WHERE id = {m} AND launch_status = 'LAUNCHING'")
        # -- a copied experiment (``import_history``)
        self.copy_unit = (
            "INSERT INTO work_units (experiment_id, id, role, args, identity, status, created_at)"
            f" VALUES ({marks(7)})")
        self.set_results_at = f"UPDATE jobs SET results_at = {m} WHERE id = {m}"
        self.insert_result = (
            f"INSERT INTO job_results (job_id, experiment_id, work_unit_id, name, value, at) VALUES ({marks(6)})")
        self.insert_link = (
            f"INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url) VALUES ({marks(5)})")
        # -- results and links of recorded jobs
        self.upsert_result = (
            f"{self.insert_result} ON CONFLICT (job_id, name) DO UPDATE SET value = excluded.value, at = excluded.at")
        self.link_job = (
            "INSERT INTO job_links (job_id, experiment_id, work_unit_id, name, url)"
            f" SELECT id, experiment_id, work_unit_id, {m}, {m} FROM jobs WHERE id = {m}"
            " ON CONFLICT (job_id, name) DO UPDATE SET url = excluded.url")
