#!/usr/bin/env bash
# Son of Grid Engine 8.1.9 (Debian gridengine-*): qmaster + execd on this host, queue all.q (8 slots).
# SGE_ROOT=/var/lib/gridengine SGE_CELL=default. Debian's /usr/bin/q* wrappers default to these,
# so qsub/qstat/qacct work without any environment (root, and xcore over ssh).
# Idempotent: returns quickly when both daemons run and the queue is healthy.
source "$(dirname "$(readlink -f "$0")")/lib.sh"
infra_init sge "$@"

HOST=$(hostname)
SPOOL=/var/spool/gridengine
COMMON=$SGE_ROOT/$SGE_CELL/common
QMASTER_LOG=$INFRA_LOG/sge_qmaster.log
EXECD_LOG=$INFRA_LOG/sge_execd.log
QMASTER_MSG=$SPOOL/qmaster/messages
QCONF_LOG=$INFRA_LOG/sge_qconf.log
EXECD_MSG=$SPOOL/execd/$HOST/messages
export SGE_MASTER_PIDFILE=/run/gridengine/qmaster.pid
export SGE_EXECD_PIDFILE=/run/gridengine/execd.pid

preseed_sge
apt_install $PKGS_sge
ensure_xcore_user

# Cluster files (the package postinst makes them when the preseed was in place; repair otherwise).
install -d -o sgeadmin -g sgeadmin -m 755 "$SGE_ROOT/$SGE_CELL" "$COMMON" /run/gridengine \
    "$SPOOL/qmaster" "$SPOOL/qmaster/job_scripts" "$SPOOL/spooldb" "$SPOOL/execd"
[ -f "$COMMON/bootstrap" ] || install -m 644 -o sgeadmin -g sgeadmin /usr/share/gridengine/default-bootstrap "$COMMON/bootstrap"
if [ ! -e "$SPOOL/spooldb/sge" ]; then
    log "initialising SGE cluster spool"
    su -s /bin/sh -c "/usr/share/gridengine/scripts/init_cluster $SGE_ROOT $SGE_CELL $SPOOL/spooldb sgeadmin" sgeadmin \
        >>"$QMASTER_LOG" 2>&1 || die "init_cluster failed" "$QMASTER_LOG"
fi
echo "$HOST" | write_if_changed "$COMMON/act_qmaster" 644 sgeadmin:sgeadmin || true
# Classic host-name mismatch: 127.0.0.1 reverse-resolves to localhost.
echo "$HOST localhost" | write_if_changed "$COMMON/host_aliases" 644 sgeadmin:sgeadmin || true

STARTED=0
qmaster_ok() { qstat -g c >/dev/null 2>&1 && qconf -sh >/dev/null 2>&1; }
if ! running sge_qmaster; then
    rm -f "$SPOOL/qmaster/lock" "$SGE_MASTER_PIDFILE"   # stale after a kill -9
    log "starting sge_qmaster (ports 6444/6445: SGE always binds all interfaces)"
    /usr/sbin/sge_qmaster >>"$QMASTER_LOG" 2>&1 || die "sge_qmaster failed to start" "$QMASTER_LOG" "$QMASTER_MSG"
    STARTED=1
fi
wait_until 60 qmaster qmaster_ok || die "sge_qmaster does not answer" "$QMASTER_LOG" "$QMASTER_MSG"

TMPD=$(mktemp -d); trap 'rm -rf "$TMPD"' EXIT

# Global configuration: root jobs allowed, accounting flushed every second, and bash (xhpc's
# `-S /bin/bash`) not started as a login shell: root's profile here runs `pyenv rehash`, and a job
# cancelled (SIGKILL) during it leaves pyenv's lock behind, after which every login shell, so every
# task, waits 60 s for it. The tests cancel many jobs; a user's cluster keeps its own setting.
# (qconf wraps long values with a trailing backslash: join those lines first)
qconf -sconf global | grep -v '^#' | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' > "$TMPD/cur"
awk '
  $1=="min_uid" {print "min_uid 0"; next}
  $1=="min_gid" {print "min_gid 0"; next}
  $1=="load_report_time" {print "load_report_time 00:00:05"; next}
  $1=="login_shells" {print "login_shells sh,ksh,csh,tcsh"; next}
  $1=="reporting_params" {print "reporting_params accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00"; next}
  {print}' "$TMPD/cur" > "$TMPD/global"
if ! cmp -s <(awk '{$1=$1; print}' "$TMPD/cur") <(awk '{$1=$1; print}' "$TMPD/global"); then
    log "setting global config (min_uid 0, min_gid 0, accounting flush 1 s, bash not a login shell)"
    (cd "$TMPD" && qconf -Mconf "$TMPD/global") >>"$QCONF_LOG" 2>&1 || die "qconf -Mconf global failed" "$QCONF_LOG" "$QMASTER_MSG"
fi

# Scheduler: run every second, and 1 s after a submit / a job end
# (flush_*_sec: a 100-task array of `true` takes ~14 s instead of ~26 s); schedd_job_info true:
# `qstat -j` says why a job waits (xhpc shows it as the pending reason).
qconf -ssconf > "$TMPD/sconf"
if ! grep -Eq '^schedule_interval[[:space:]]+0:0:1$' "$TMPD/sconf" \
   || ! grep -Eq '^flush_submit_sec[[:space:]]+1$' "$TMPD/sconf" \
   || ! grep -Eq '^flush_finish_sec[[:space:]]+1$' "$TMPD/sconf" \
   || ! grep -Eq '^schedd_job_info[[:space:]]+true$' "$TMPD/sconf"; then
    sed -i -E 's/^schedule_interval.*/schedule_interval 0:0:1/; s/^flush_submit_sec.*/flush_submit_sec 1/; s/^flush_finish_sec.*/flush_finish_sec 1/; s/^schedd_job_info.*/schedd_job_info true/' "$TMPD/sconf"
    qconf -Msconf "$TMPD/sconf" >>"$QCONF_LOG" 2>&1 || die "qconf -Msconf failed" "$QCONF_LOG" "$QMASTER_MSG"
fi

# Submit host, exec host, host group, parallel env smp, queue all.q.
qconf -ss 2>/dev/null | grep -qx "$HOST" || qconf -as "$HOST" >>"$QCONF_LOG" 2>&1
cat > "$TMPD/exec" <<CONF
hostname              $HOST
load_scaling          NONE
complex_values        NONE
user_lists            NONE
xuser_lists           NONE
projects              NONE
xprojects             NONE
usage_scaling         NONE
report_variables      NONE
CONF
qconf -se "$HOST" >/dev/null 2>&1 || qconf -Ae "$TMPD/exec" >>"$QCONF_LOG" 2>&1 || die "qconf -Ae failed" "$QCONF_LOG"
printf 'group_name @allhosts\nhostlist %s\n' "$HOST" > "$TMPD/hgrp"
if ! qconf -shgrp @allhosts >/dev/null 2>&1; then
    qconf -Ahgrp "$TMPD/hgrp" >>"$QCONF_LOG" 2>&1 || die "qconf -Ahgrp failed" "$QCONF_LOG"
elif [ "$(qconf -shgrp @allhosts | awk '$1=="hostlist" {print $2}')" != "$HOST" ]; then
    # the machine's hostname changed since the cluster was configured
    qconf -Mhgrp "$TMPD/hgrp" >>"$QCONF_LOG" 2>&1 || die "qconf -Mhgrp failed" "$QCONF_LOG"
fi
cat > "$TMPD/smp" <<'CONF'
pe_name            smp
slots              999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    $pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
CONF
qconf -sp smp >/dev/null 2>&1 || qconf -Ap "$TMPD/smp" >>"$QCONF_LOG" 2>&1 || die "qconf -Ap smp failed" "$QCONF_LOG"
cat > "$TMPD/all.q" <<'CONF'
qname                 all.q
hostlist              @allhosts
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               smp
rerun                 FALSE
slots                 8
tmpdir                /tmp
shell                 /bin/sh
prolog                NONE
epilog                NONE
shell_start_mode      posix_compliant
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:60
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
CONF
qconf -sq all.q >/dev/null 2>&1 || qconf -Aq "$TMPD/all.q" >>"$QCONF_LOG" 2>&1 || die "qconf -Aq all.q failed" "$QCONF_LOG" "$QMASTER_MSG"

# Exec daemon.
if ! running sge_execd; then
    rm -f "$SGE_EXECD_PIDFILE"
    log "starting sge_execd"
    /usr/sbin/sge_execd >>"$EXECD_LOG" 2>&1 || die "sge_execd failed to start" "$EXECD_LOG" "$EXECD_MSG"
    STARTED=1
fi
# Queue instance healthy: listed, with no state flags (au = execd unreachable, E = error, d = disabled).
queue_ok() {
    local line
    line=$(qstat -f -q "all.q@$HOST" 2>/dev/null | awk -v q="all.q@$HOST" '$1==q')
    [ -n "$line" ] && [ "$(awk '{print NF}' <<<"$line")" -eq 5 ]
}
if ! wait_until 60 "queue all.q" queue_ok; then
    # An error state (E) survives restarts: clear it once and retry.
    qmod -c "all.q@$HOST" >/dev/null 2>&1 || true; qmod -e "all.q@$HOST" >/dev/null 2>&1 || true
    wait_until 30 "queue all.q" queue_ok \
        || die "queue all.q@$HOST not healthy: $(qstat -f -q all.q 2>&1 | tail -n +3)" "$EXECD_LOG" "$EXECD_MSG" "$QMASTER_MSG"
fi

# After a (re)start, prove the whole path: a 3-task array must finish and show in qacct.
if [ "$STARTED" = 1 ] || [ -n "${XCORE_INFRA_VERIFY:-}" ]; then
    jid=$(qsub -terse -t 1-3 -N xcore_infra_check -b y -o /dev/null -e /dev/null true) \
        || die "qsub failed" "$QMASTER_MSG"
    jid=${jid%%.*}
    acct_done() { [ "$(qacct -j "$jid" 2>/dev/null | grep -c '^exit_status')" -ge 3 ]; }
    wait_until 90 "qacct" acct_done \
        || die "array job $jid did not show up in qacct: $(qstat 2>&1 | tail -n 5)" "$EXECD_MSG" "$QMASTER_MSG"
    log "verified: array job $jid (3 tasks) completed and is in qacct"
fi
log "ready: queue all.q@$HOST ($(qstat -f -q all.q | awk -v q="all.q@$HOST" '$1==q {print $3}') used/resv/total slots)"
