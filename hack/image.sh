#!/usr/bin/env bash
# make image: build the quotree container image (Dockerfile) with podman, on a machine that
# reaches no container registry.
#
#  1. installs what it needs with apt when missing (podman, runc, debootstrap; one
#     `apt-get update` first when the package lists are empty or an install fails);
#  2. makes the base image once: a minimal Debian bookworm root with its python3 (3.11)
#     from Debian's mirror (debootstrap), imported with `podman import` as
#     ${BASE_TAG}; the root's tarball is kept in ${IMAGE_CACHE} (outside the work tree)
#     so a wiped podman store re-imports it without a new debootstrap;
#  3. `podman build --isolation chroot --build-arg BASE_IMAGE=${BASE_TAG}` of the
#     Dockerfile: Python packages come from PyPI; podman's layer cache makes a rebuild
#     after a code change cost only the last layers.
#
#   hack/image.sh              build (or rebuild) ${IMAGE}
#   hack/image.sh --base       only make sure the base image exists
#   hack/image.sh --print      print the image name and exit
#
# Environment: QUOTREE_IMAGE (default localhost/quotree:dev), QUOTREE_BASE_IMAGE (use an
# existing base, e.g. python:3.11-slim where a registry is reachable: no debootstrap).
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/lib.sh
source "${HACK_DIR}/lib.sh"

IMAGE="${QUOTREE_IMAGE:-localhost/quotree:dev}"
IMAGE_CACHE="${QUOTREE_CACHE}/image"
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR="${QUOTREE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# Bump when the base's package list changes: a new tag makes a new base.
BASE_REV=1
BASE_TAG="localhost/quotree-base:${DEBIAN_SUITE}-py3-r${BASE_REV}"
BASE_TARBALL="${IMAGE_CACHE}/${DEBIAN_SUITE}-py3-r${BASE_REV}.tar"
BASE_PACKAGES=python3,python3-venv,ca-certificates
NEEDED_PACKAGES=(podman runc debootstrap)

ilog() { printf '[quotree-image] %s\n' "$*" >&2; }

if [[ "${1:-}" == "--print" ]]; then
  echo "${IMAGE}"
  exit 0
fi

[[ "$(id -u)" == 0 ]] || die "make image needs root here (podman as root, debootstrap)"

ensure_packages() {
  local missing=() p
  for p in "${NEEDED_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("${p}")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  ilog "installing with apt: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
    apt-get update -qq
  fi
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

ensure_base() {
  [[ -n "${QUOTREE_BASE_IMAGE:-}" ]] && return
  if podman image exists "${BASE_TAG}"; then
    ilog "base ${BASE_TAG}: cached"
    return
  fi
  mkdir -p "${IMAGE_CACHE}"
  if [[ ! -s "${BASE_TARBALL}" ]]; then
    local root="${IMAGE_CACHE}/rootfs.tmp" start=${SECONDS}
    rm -rf "${root}"
    ilog "base: debootstrap ${DEBIAN_SUITE} (${BASE_PACKAGES}) from ${DEBIAN_MIRROR}"
    debootstrap --variant=minbase --include="${BASE_PACKAGES}" \
      "${DEBIAN_SUITE}" "${root}" "${DEBIAN_MIRROR}" >"${IMAGE_CACHE}/debootstrap.log" 2>&1 \
      || { tail -n 20 "${IMAGE_CACHE}/debootstrap.log" >&2; die "debootstrap failed"; }
    # What an image needs no copy of: package caches, lists, docs.
    rm -rf "${root}"/var/cache/apt/archives/*.deb "${root}"/var/lib/apt/lists/* \
      "${root}"/usr/share/doc/* "${root}"/usr/share/man/* "${root}"/usr/share/locale/*
    tar --numeric-owner -C "${root}" -cf "${BASE_TARBALL}.tmp" .
    mv -f "${BASE_TARBALL}.tmp" "${BASE_TARBALL}"
    rm -rf "${root}"
    ilog "base: root filesystem made in $((SECONDS - start))s ($(du -h "${BASE_TARBALL}" | cut -f1))"
  fi
  podman import --quiet \
    --change 'CMD ["/usr/bin/python3"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "${BASE_TARBALL}" "${BASE_TAG}" >/dev/null
  ilog "base ${BASE_TAG}: imported from ${BASE_TARBALL}"
}

ensure_packages
ensure_base
[[ "${1:-}" == "--base" ]] && exit 0

build_args=(--build-arg "BASE_IMAGE=${QUOTREE_BASE_IMAGE:-${BASE_TAG}}")
# A TLS-intercepting proxy between this machine and PyPI: give pip the host's CA bundle
# for the build only (a read-only mount; nothing of it lands in a layer).
extra_cas=(/usr/local/share/ca-certificates/*.crt)
if [[ -e "${extra_cas[0]}" ]]; then
  build_args+=(--volume /etc/ssl/certs/ca-certificates.crt:/run/quotree-build-ca.crt:ro
    --build-arg PIP_CERT=/run/quotree-build-ca.crt)
fi
start=${SECONDS}
ilog "building ${IMAGE}"
podman build --isolation chroot "${build_args[@]}" -t "${IMAGE}" -f "${REPO_ROOT}/Dockerfile" \
  "${REPO_ROOT}"
ilog "${IMAGE} built in $((SECONDS - start))s"
