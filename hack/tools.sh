#!/usr/bin/env bash
# Tools the tests need from Debian's packages, installed when missing (`make test` runs
# this before pytest, like the control plane builds itself on first use):
#   prometheus  gives `prometheus` and `promtool` (alert rule tests, the metrics e2e test)
#   chromium    headless browser for the tree page test
# Nothing is left running by the install: Debian's prometheus package ships a service;
# package scripts are told not to start services (policy-rc.d), and on a systemd
# machine the service is stopped and disabled. The tests start their own Prometheus on
# 127.0.0.1 with a temporary directory.
set -euo pipefail

need=()
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
[[ -x /usr/bin/chromium ]] || need+=(chromium fonts-liberation)
if [[ ${#need[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi

log() { printf '[quotree-tools] %s\n' "$*" >&2; }
log "installing ${need[*]} from Debian's packages (once; a few minutes)"
start=$(date +%s)

# Keep package scripts from starting services, unless a policy is already in place.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e ${policy} ]]; then
  printf '#!/bin/sh\nexit 101\n' | ${SUDO} tee "${policy}" >/dev/null
  ${SUDO} chmod 755 "${policy}"
  own_policy=1
fi
cleanup() { if [[ ${own_policy} -eq 1 ]]; then ${SUDO} rm -f "${policy}"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o DPkg::Lock::Timeout=600 --no-install-recommends)
${SUDO} apt-get -q -o DPkg::Lock::Timeout=600 update >/dev/null
${SUDO} apt-get install "${apt_opts[@]}" "${need[@]}" >/dev/null

if [[ " ${need[*]} " == *" prometheus "* ]] && [[ -d /run/systemd/system ]]; then
  ${SUDO} systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi

log "installed ${need[*]} in $(($(date +%s) - start)) s"
