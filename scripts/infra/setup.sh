#!/usr/bin/env bash
# Install and start the real services xcore's integration tests use.
#   usage: scripts/infra/setup.sh [sshd|slurm|sge|docker|postgres|browser|registry|all]...   (default: all)
# Exit: 0 all ready; 1 a service failed (its log tail is printed); 2 bad usage; 3 not root (skip).
source "$(dirname "$(readlink -f "$0")")/lib.sh"
HERE=$(dirname "$(readlink -f "$0")")
SERVICE_NAME=setup

ALL=(sshd slurm sge docker postgres browser registry)
want=()
[ $# -eq 0 ] && set -- all
for a in "$@"; do
    case "$a" in
        all) want+=("${ALL[@]}") ;;
        sshd|slurm|sge|docker|postgres|browser|registry) want+=("$a") ;;
        -h|--help) sed -n 2,4p "$0"; exit 0 ;;
        *) echo "setup.sh: unknown service '$a' (choose from: ${ALL[*]} all)" >&2; exit 2 ;;
    esac
done
# de-duplicate, keep the canonical order
services=()
for s in "${ALL[@]}"; do
    for w in "${want[@]}"; do [ "$s" = "$w" ] && { services+=("$s"); break; }; done
done

require_root
mkdir -p "$INFRA_STATE" "$INFRA_LOG"
ensure_hostname
t0=$SECONDS

# One apt transaction for everything missing (much faster than one per service).
pkgs=()
for s in "${services[@]}"; do
    v="PKGS_$s"; read -r -a p <<<"${!v}"; pkgs+=("${p[@]}")
done
[[ " ${services[*]} " == *" sge "* ]] && preseed_sge
if [ -n "$(missing_pkgs "${pkgs[@]}")" ]; then
    ta=$SECONDS
    apt_install "${pkgs[@]}"
    log "packages installed in $((SECONDS - ta)) s"
fi

failed=()
for s in "${services[@]}"; do
    ts=$EPOCHREALTIME
    if bash "$HERE/$s.sh"; then
        printf '[xcore-infra:setup] %-6s ready   in %5.1f s\n' "$s" "$(awk -v a="$EPOCHREALTIME" -v b="$ts" 'BEGIN{print a-b}')" >&2
    else
        rc=$?
        printf '[xcore-infra:setup] %-6s FAILED  in %5.1f s (exit %s)\n' "$s" "$(awk -v a="$EPOCHREALTIME" -v b="$ts" 'BEGIN{print a-b}')" "$rc" >&2
        failed+=("$s")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    log "FAILED: ${failed[*]} (total $((SECONDS - t0)) s)"
    exit 1
fi
log "all ready: ${services[*]} (total $((SECONDS - t0)) s)"
