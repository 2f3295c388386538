#!/usr/bin/env bash
# An OCI image registry on 127.0.0.1:5000 (Debian docker-registry 2.8, no auth, own config),
# for xk8s's image push tests. dockerd trusts loopback registries without configuration.
# Idempotent: never starts a second registry.
source "$(dirname "$(readlink -f "$0")")/lib.sh"
infra_init registry "$@"

REGISTRY_DIR=$INFRA_STATE/registry
REGISTRY_LOG=$INFRA_LOG/registry.log

apt_install $PKGS_registry
mkdir -p "$REGISTRY_DIR/data"
write_if_changed "$REGISTRY_DIR/config.yml" 0644 root:root <<CONF || true
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/data
  delete:
    enabled: true
http:
  addr: $REGISTRY_ADDR
CONF

registry_ok() { curl -fs "http://$REGISTRY_ADDR/v2/" >/dev/null; }
if ! registry_ok; then
    if running docker-registry; then
        log "docker-registry runs already: waiting for it"
    else
        log "starting docker-registry on $REGISTRY_ADDR"
        start_detached "$REGISTRY_LOG" docker-registry serve "$REGISTRY_DIR/config.yml"
    fi
    wait_until 30 "registry /v2/" registry_ok || die "docker-registry does not answer on $REGISTRY_ADDR" "$REGISTRY_LOG"
fi
log "ready: registry on $REGISTRY_ADDR"
