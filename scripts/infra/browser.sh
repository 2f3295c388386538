#!/usr/bin/env bash
# Debian's Chromium and its WebDriver, for the dashboard's browser tests (Selenium drives
# /usr/bin/chromium through /usr/bin/chromedriver; nothing downloads a browser).
# Idempotent: returns at once when both are installed and the driver answers.
source "$(dirname "$(readlink -f "$0")")/lib.sh"
infra_init browser "$@"

apt_install $PKGS_browser
command -v chromium >/dev/null || die "chromium is not on PATH after installing $PKGS_browser"
command -v chromedriver >/dev/null || die "chromedriver is not on PATH after installing $PKGS_browser"
chromedriver --version >/dev/null 2>&1 || die "chromedriver does not run"
log "$(chromium --version 2>/dev/null | head -1); $(chromedriver --version | head -1)"
