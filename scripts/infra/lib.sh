# shellcheck shell=bash
# Shared helpers for the xcore test-infrastructure scripts. Source it; do not run it.
# Conventions (other code relies on them, keep them stable):
#   sshd       127.0.0.1:2222, user xcore, key /var/lib/xcore-infra/ssh/id_ed25519,
#              known_hosts /var/lib/xcore-infra/ssh/known_hosts
#   slurm      partitions debug (default) and short (MaxTime 10 min), never preempted; lowprio
#              (preempted by requeue) and highprio (PriorityTier 10), node "localhost"
#   sge        SGE_ROOT=/var/lib/gridengine SGE_CELL=default, queue all.q
#   docker     local base image xcore-python:3.11
#   postgres   127.0.0.1:5432, role xcore (password in /var/lib/xcore-infra/postgres/password),
#              database xcore_test, URL in /var/lib/xcore-infra/postgres/url (root only)
#   browser    /usr/bin/chromium and /usr/bin/chromedriver (Debian packages)
#   registry   OCI registry on 127.0.0.1:5000 (no auth)
set -euo pipefail

INFRA_STATE=/var/lib/xcore-infra
INFRA_LOG=/var/log/xcore-infra
XCORE_USER=xcore
XCORE_HOME=/home/xcore
SSH_DIR=$INFRA_STATE/ssh
SSH_KEY=$SSH_DIR/id_ed25519
SSH_KNOWN_HOSTS=$SSH_DIR/known_hosts
SSH_PORT=2222
export SGE_ROOT=/var/lib/gridengine
export SGE_CELL=default
DOCKER_IMAGE=${XCORE_INFRA_DOCKER_IMAGE:-xcore-python:3.11}   # override only to test docker.sh
PG_PORT=5432
PG_ROLE=xcore
PG_DATABASE=xcore_test
export DEBIAN_FRONTEND=noninteractive
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

# Packages per service (setup.sh installs the union in one apt-get transaction).
PKGS_sshd="openssh-server openssh-client rsync"
PKGS_slurm="slurm-wlm slurm-client slurmctld slurmd slurmdbd munge mariadb-server mariadb-client"
PKGS_sge="gridengine-master gridengine-exec gridengine-client"
PKGS_browser="chromium chromium-driver fonts-dejavu-core"
PKGS_docker="docker.io busybox-static python3.11 python3-pip-whl python3-setuptools-whl ca-certificates"
PKGS_postgres="postgresql postgresql-client"
PKGS_registry="docker-registry curl"
REGISTRY_ADDR=127.0.0.1:5000   # registry: image pushes for xk8s

SERVICE_NAME=${SERVICE_NAME:-infra}

log() { printf '[xcore-infra:%s] %s\n' "$SERVICE_NAME" "$*" >&2; }

# die MESSAGE [LOGFILE...]: loud failure with the tail of each log file.
die() {
    local msg=$1; shift || true
    printf '\n[xcore-infra:%s] ERROR: %s\n' "$SERVICE_NAME" "$msg" >&2
    local f
    for f in "$@"; do
        if [ -f "$f" ]; then
            printf -- '----- last 40 lines of %s -----\n' "$f" >&2
            tail -n 40 "$f" >&2 || true
        fi
    done
    exit 1
}

require_root() {
    if [ "$(id -u)" != 0 ]; then
        echo "xcore-infra: must be run as root to install and start services; skipping (exit 3)." >&2
        exit 3
    fi
}

ensure_hostname() {
    getent hosts "$(hostname)" >/dev/null || echo "127.0.1.1 $(hostname)" >> /etc/hosts
}

# Missing packages among the arguments (prints them).
missing_pkgs() {
    local p st
    for p in "$@"; do
        st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$st" = installed ] || printf '%s\n' "$p"
    done
}

APT_OPTS=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=600)

apt_update_once() {
    # Once per setup run (setup.sh exports the stamp), or when lists are older than 6 h.
    local stamp=$INFRA_STATE/apt-updated
    if [ -n "${XCORE_INFRA_APT_UPDATED:-}" ] || { [ -f "$stamp" ] && [ -n "$(find "$stamp" -mmin -360 2>/dev/null)" ]; }; then
        return 0
    fi
    log "apt-get update"
    apt-get -q -o DPkg::Lock::Timeout=600 update >&2 || die "apt-get update failed"
    mkdir -p "$INFRA_STATE"; touch "$stamp"
    export XCORE_INFRA_APT_UPDATED=1
}

apt_install() {
    local missing
    missing=$(missing_pkgs "$@")
    [ -z "$missing" ] && return 0
    apt_update_once
    # shellcheck disable=SC2086
    log "apt-get install $(echo $missing)"
    # shellcheck disable=SC2086
    apt-get install "${APT_OPTS[@]}" $missing >"$INFRA_LOG/apt.log" 2>&1 \
        || die "apt-get install failed: $(echo $missing)" "$INFRA_LOG/apt.log"
}

preseed_sge() {
    command -v debconf-set-selections >/dev/null || return 0
    local h; h=$(hostname)
    debconf-set-selections <<SEL
gridengine-common shared/gridengineconfig boolean true
gridengine-common shared/gridenginecell string default
gridengine-common shared/gridenginemaster string $h
gridengine-client shared/gridengineconfig boolean true
gridengine-client shared/gridenginecell string default
gridengine-client shared/gridenginemaster string $h
SEL
}

ensure_xcore_user() {
    if ! getent passwd "$XCORE_USER" >/dev/null; then
        useradd -m -d "$XCORE_HOME" -s /bin/bash "$XCORE_USER"
    fi
    # A locked password ('!') makes sshd (UsePAM no) refuse even key logins.
    if [ "$(getent shadow "$XCORE_USER" | cut -d: -f2)" != '*' ]; then
        usermod -p '*' "$XCORE_USER"
    fi
    install -d -m 755 -o "$XCORE_USER" -g "$XCORE_USER" "$XCORE_HOME"
    install -d -m 755 -o "$XCORE_USER" -g "$XCORE_USER" "$XCORE_HOME/xcore-staging"
}

# wait_until TIMEOUT_S DESCRIPTION CMD...: poll CMD every 0.2 s.
wait_until() {
    local timeout=$1 what=$2; shift 2
    local deadline=$((SECONDS + timeout))
    while ! "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            return 1
        fi
        sleep 0.2
    done
}

# True when a process with exactly this name runs.
running() { ps -C "$1" -o stat= 2>/dev/null | grep -qv "^Z"; }

# start_detached LOGFILE CMD...: run a foreground daemon detached (own session, log file).
start_detached() {
    local logf=$1; shift
    setsid nohup "$@" >>"$logf" 2>&1 </dev/null &
}

# write_if_changed FILE MODE OWNER: stdin -> FILE when content differs. Returns 0 if changed.
write_if_changed() {
    local f=$1 mode=$2 owner=$3 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [ -f "$f" ] && cmp -s "$tmp" "$f"; then
        rm -f "$tmp"
        chmod "$mode" "$f"; chown "$owner" "$f"
        return 1
    fi
    install -D -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$tmp" "$f"
    rm -f "$tmp"
    return 0
}

# infra_init SERVICE "$@": root check, dirs, hostname; runs the calling script under a
# per-service lock (two test sessions may call setup.sh concurrently). flock -o: the lock
# is held by flock itself, never inherited by the daemons the script starts.
infra_init() {
    SERVICE_NAME=$1; shift
    require_root
    mkdir -p "$INFRA_STATE" "$INFRA_LOG" /run/lock
    if [ "${XCORE_INFRA_LOCKED:-}" != "$SERVICE_NAME" ]; then
        local rc=0
        XCORE_INFRA_LOCKED=$SERVICE_NAME flock -o -E 75 -w 900 "/run/lock/xcore-infra.$SERVICE_NAME.lock" \
            bash "$0" "$@" || rc=$?
        [ "$rc" = 75 ] && die "another xcore-infra $SERVICE_NAME run held /run/lock/xcore-infra.$SERVICE_NAME.lock for 900 s"
        exit "$rc"
    fi
    unset XCORE_INFRA_LOCKED
    ensure_hostname
}
