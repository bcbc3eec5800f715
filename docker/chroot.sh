# shellcheck shell=bash
# Another Slurm release beside the host's, natively (`HOPS_SLURM=24.11
# cluster.sh up`), sourced by cluster.sh and using its helpers.
#
# Why: centres run newer Slurm than Debian 12's 22.05, and a 22.05 client
# cannot talk to a 24.11 controller. Debian trixie carries 24.11, so the
# cluster runs from a trixie root (docker/rootfs.sh, cached) that the cluster
# gets as its own hard-linked copy. Daemons and commands run in it through
# small wrappers (`unshare --root`), and the paths that matter (state
# directory, munge and MariaDB sockets, /tmp, this repository) are
# bind-mounted at the same place, so the same slurm.conf serves both sides.
# Non-root users run the wrappers through a user namespace mapped to their own
# uid, so munge still vouches for who they really are.

readonly ROOT_DIR="${CLUSTER_DIR}/root"
readonly MOUNTS_FILE="${CLUSTER_DIR}/mounts"
readonly WRAPPER_DIR="${CLUSTER_DIR}/bin"
# Every Slurm command hops, the tests and cluster.sh run, and the daemons.
readonly WRAPPED=(sbatch squeue sinfo scontrol scancel sacct sacctmgr srun salloc sprio
    sshare sstat sdiag slurmctld slurmd slurmdbd slurmrestd)

# The installation the repository's .venv was made from, when it is not the
# system's (pyenv and the like): jobs started with the venv's python need it.
venv_python_prefix() {
    local repo python
    repo="$(cd "${SCRIPT_DIR}/.." && pwd)"
    python="$(readlink -f "${repo}/.venv/bin/python" 2>/dev/null || true)"
    [[ -n "${python}" && "${python}" != /usr/* ]] || return 0
    dirname "$(dirname "${python}")"
}

mounted_below() { findmnt -rn -o TARGET | grep "^$1\(/\|$\)" || true; }

# Bind mounts made by `up`, undone in reverse by `down`. Nothing is deleted
# below the root while anything is mounted there (/tmp is).
unmount_root() {
    local target
    if [[ -f "${MOUNTS_FILE}" ]]; then
        tac "${MOUNTS_FILE}" | while read -r target; do
            mountpoint -q "${target}" || continue
            umount "${target}" 2>/dev/null || umount -l "${target}" || true
        done
        rm -f "${MOUNTS_FILE}"
    fi
    [[ -z "$(mounted_below "${ROOT_DIR}")" ]] || die "still mounted below ${ROOT_DIR}: $(mounted_below "${ROOT_DIR}" | tr '\n' ' ')"
}

bind_into_root() {
    local source="$1" target="${ROOT_DIR}$1" mode="${2:-rw}"
    if [[ -d "${source}" ]]; then
        # a file left where a directory goes (a bind made before its source existed)
        [[ -d "${target}" ]] || rm -f "${target}"
        mkdir -p "${target}"
    else
        mkdir -p "$(dirname "${target}")"
        [[ -e "${target}" ]] || touch "${target}"
    fi
    mount --bind "${source}" "${target}"
    echo "${target}" >>"${MOUNTS_FILE}"
    if [[ "${mode}" == ro ]]; then mount -o remount,bind,ro "${target}"; fi
}

# The cluster's own copy of the cached root: hard links, so it costs no space
# and a second cluster's mounts never meet this one's. Files the cluster
# changes (users, hosts) are replaced, never written through the links.
prepare_root() {
    local cached repo path
    cached="$(bash "${SCRIPT_DIR}/rootfs.sh" "$(suite_of_release "${RELEASE}")")"
    unmount_root
    if [[ ! -f "${ROOT_DIR}/.hops-rootfs" ]] || ! cmp -s "${cached}/.hops-rootfs" "${ROOT_DIR}/.hops-rootfs"; then
        log "linking the ${RELEASE} root into ${ROOT_DIR}"
        rm -rf "${ROOT_DIR}"
        cp -al "${cached}" "${ROOT_DIR}"
    fi
    local file
    for file in /etc/passwd /etc/group /etc/hosts; do
        rm -f "${ROOT_DIR}${file}"
        cp "${file}" "${ROOT_DIR}${file}"
    done
    mount -t proc proc "${ROOT_DIR}/proc"
    echo "${ROOT_DIR}/proc" >"${MOUNTS_FILE}"
    bind_into_root /sys ro
    bind_into_root /dev
    bind_into_root /run/munge
    [[ -d /run/mysqld ]] && bind_into_root /run/mysqld
    bind_into_root "${CLUSTER_DIR}"
    bind_into_root /tmp
    repo="$(cd "${SCRIPT_DIR}/.." && pwd)"
    bind_into_root "${repo}" ro
    path="$(venv_python_prefix)"
    [[ -z "${path}" ]] || bind_into_root "${path}" ro
    for path in ${HOPS_CONTAINER_MOUNTS:-}; do
        bind_into_root "${path}"
    done
}

# write_exec_wrappers CMD...: one script per Slurm command in WRAPPER_DIR that
# runs it through CMD (the chroot by default).
write_exec_wrappers() {
    local name
    mkdir -p "${WRAPPER_DIR}"
    for name in "${WRAPPED[@]}"; do
        if [[ $# -gt 0 ]]; then
            # docker exec: root only (the engine's socket), the caller's identity kept.
            printf '%s\n' '#!/bin/sh' \
                "# Slurm ${RELEASE}'s ${name} in container ${CONTAINER_NAME} (written by docker/cluster.sh)." \
                "exec env DOCKER_HOST=${DOCKER_HOST:-} $* -u \"\$(id -u):\$(id -g)\" -w \"\$PWD\" -e SLURM_CONF=\"\${SLURM_CONF:-}\" ${CONTAINER_NAME} ${name} \"\$@\"" \
                >"${WRAPPER_DIR}/${name}"
        else
            printf '%s\n' '#!/bin/sh' \
                "# Slurm ${RELEASE}'s ${name} from ${ROOT_DIR} (written by docker/cluster.sh)." \
                "exec ${WRAPPER_DIR}/slurm-exec ${name} \"\$@\"" >"${WRAPPER_DIR}/${name}"
        fi
        chmod 755 "${WRAPPER_DIR}/${name}"
    done
    [[ $# -gt 0 ]] && return 0
    # slurm-exec COMMAND ARGS...: the one prefix hops needs ([slurm] command_prefix).
    cat >"${WRAPPER_DIR}/slurm-exec" <<EOF
#!/bin/sh
# Runs a command of Slurm ${RELEASE} inside ${ROOT_DIR} (written by docker/cluster.sh).
# Root enters the root directly; anyone else through a user namespace mapped
# to their own uid and gid, so munge still vouches for the real user.
[ \$# -gt 0 ] || { echo "usage: slurm-exec COMMAND [ARGS...]" >&2; exit 2; }
# Already inside (a job or a daemon of the root calling a command): run it.
if [ -f /.hops-rootfs ]; then
    PATH=/usr/sbin:/usr/bin:/sbin:/bin exec "\$@"
fi
wd="\$PWD"
[ -d "${ROOT_DIR}\$wd" ] || wd=/
# The root's own PATH, so the command is the root's and never these wrappers.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
if [ "\$(id -u)" = 0 ]; then
    exec /usr/bin/unshare --root=${ROOT_DIR} --wd="\$wd" "\$@"
fi
exec /usr/bin/unshare --user --map-user="\$(id -u)" --map-group="\$(id -g)" \\
    --root=${ROOT_DIR} --wd="\$wd" "\$@"
EOF
    chmod 755 "${WRAPPER_DIR}/slurm-exec"
}

use_wrappers_on_path() {
    case ":${PATH}:" in
    *":${WRAPPER_DIR}:"*) ;;
    *) export PATH="${WRAPPER_DIR}:${PATH}" ;;
    esac
}

chroot_exports() {
    print_exports plain
    echo "export PATH=${WRAPPER_DIR}:\$PATH"
    echo "export HOPS_SLURM_EXEC=${WRAPPER_DIR}/slurm-exec"
}
