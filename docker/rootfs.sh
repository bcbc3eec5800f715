#!/usr/bin/env bash
# Make (once) a minimal Debian root holding Slurm, and print its path.
#
#   docker/rootfs.sh bookworm     # Slurm 22.05
#   docker/rootfs.sh trixie       # Slurm 24.11
#
# Why: where no image registry is reachable, this root is the base image of the
# containerised test cluster (`docker import`), and the trixie root also runs
# the Slurm 24.11 cluster natively in a chroot. debootstrap takes minutes, so
# the root is cached under HOPS_ROOTFS_CACHE (default /var/tmp/hops-rootfs) and
# rebuilt only when the suite's package list changes. Packages come from the
# Debian mirror this host's apt already uses (or HOPS_DEBIAN_MIRROR).
#
# `docker/rootfs.sh SUITE --tar` writes the root as a tar stream on stdout
# instead (what `docker import -` reads).
set -euo pipefail

readonly SUITE="${1:?usage: rootfs.sh bookworm|trixie [--tar]}"
readonly CACHE="${HOPS_ROOTFS_CACHE:-/var/tmp/hops-rootfs}"
# Everything a test cluster node needs: Slurm with accounting and REST (and
# auth/jwt, which slurmrestd's token authentication needs), munge, a MariaDB
# client (cluster.sh creates the accounting database), ps/ss for cluster.sh,
# and python3 for the test jobs.
readonly PACKAGES=(slurmctld slurmd slurm-client slurmdbd slurmrestd slurm-wlm-jwt-plugin
    munge mariadb-client procps iproute2 python3)
# Bump when the way the root is made changes. Each recipe has its own cache
# directory, so checkouts of different recipes never rebuild each other's root.
readonly RECIPE=2
readonly ROOT="${CACHE}/${SUITE}-r${RECIPE}"

log() { echo "rootfs: [$(date +%T)] $*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

case "${SUITE}" in
bookworm | trixie | sid) ;;
*) die "unknown suite ${SUITE} (bookworm, trixie or sid)" ;;
esac
[[ ${EUID} -eq 0 ]] || die "run as root (debootstrap)"

wanted_stamp() { echo "recipe=${RECIPE} suite=${SUITE} packages=${PACKAGES[*]}"; }

is_ready() { [[ -f "${ROOT}/.hops-rootfs" && "$(<"${ROOT}/.hops-rootfs")" == "$(wanted_stamp)" ]]; }

# The mirror this host already installs from: its apt sources name it.
debian_mirror() {
    if [[ -n "${HOPS_DEBIAN_MIRROR:-}" ]]; then
        echo "${HOPS_DEBIAN_MIRROR}"
        return
    fi
    local uri
    uri="$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }')"
    if [[ -z "${uri}" ]]; then
        uri="$(cat /etc/apt/sources.list 2>/dev/null |
            awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')"
    fi
    [[ -n "${uri}" ]] || die "no Debian mirror in /etc/apt; set HOPS_DEBIAN_MIRROR"
    echo "${uri}"
}

# Nothing may be mounted below a tree we are about to delete.
assert_unmounted() {
    if findmnt -rn -o TARGET | grep -q "^$1\(/\|$\)"; then
        die "something is mounted below $1; unmount it first"
    fi
}

build() {
    local tmp="${ROOT}.tmp" start=${SECONDS}
    command -v debootstrap >/dev/null || {
        log "installing debootstrap"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
    }
    assert_unmounted "${tmp}"
    rm -rf "${tmp}"
    log "debootstrap ${SUITE} with ${PACKAGES[*]} (a few minutes)"
    local includes
    includes="$(
        IFS=,
        echo "${PACKAGES[*]}"
    )"
    if ! debootstrap --variant=minbase --include="${includes}" "${SUITE}" "${tmp}" \
        "$(debian_mirror)" >"${ROOT}.debootstrap.log" 2>&1; then
        tail -n 20 "${ROOT}.debootstrap.log" >&2
        die "debootstrap failed (log: ${ROOT}.debootstrap.log)"
    fi
    # Downloaded packages and lists are dead weight in an image.
    rm -rf "${tmp}"/var/cache/apt/archives/*.deb "${tmp}"/var/lib/apt/lists/*
    wanted_stamp >"${tmp}/.hops-rootfs"
    assert_unmounted "${ROOT}"
    rm -rf "${ROOT}"
    mv "${tmp}" "${ROOT}"
    log "${SUITE} root ready in $((SECONDS - start)) s: ${ROOT}"
}

main() {
    mkdir -p "${CACHE}"
    # One builder per suite at a time; the others wait and reuse its root.
    exec 9>"${CACHE}/${SUITE}-r${RECIPE}.lock"
    flock 9
    is_ready || build
    if [[ "${2:-}" == --tar ]]; then
        tar -C "${ROOT}" --numeric-owner --exclude=./proc/* --exclude=./sys/* \
            --exclude=./dev/* --exclude=./.hops-rootfs -c .
    else
        echo "${ROOT}"
    fi
}

main "$@"
