# shellcheck shell=bash
# The containerised test cluster (`cluster.sh up --container`), sourced by
# cluster.sh and using its helpers.
#
# Why this shape: the machines hops is tested on have a Docker engine but no
# image registry and no privileged containers. So the image is built FROM a
# public Debian image where a registry answers and FROM an imported debootstrap
# root (docker/rootfs.sh) where none does; the container runs the very same
# cluster.sh with host networking, so hops on the host reaches it on the
# cluster's own ports exactly as it reaches the native cluster. The state
# directory is bind-mounted at the same path, so the host's SLURM_CONF is the
# container's, and the host's munged and MariaDB serve both sides (one munge
# key, one accounting server).

readonly CONTAINER_NAME="hops-slurm-${CTLD_PORT}"
readonly CONTAINER_LABEL="org.hops.cluster"
readonly CONTAINER_MARK="${CLUSTER_DIR}/container"
readonly DOCKER_DIR="${HOPS_DOCKER_DIR:-/var/tmp/hops-docker}"
readonly OWN_DOCKER_HOST="unix://${DOCKER_DIR}/docker.sock"
DOCKER=()

# Debian's client matches Debian's engine; any other `docker` will do.
docker_cli() {
    if [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker; else command -v docker; fi
}

engine_at() { [[ -n "$1" ]] && DOCKER_HOST="$1" "$(docker_cli)" version >/dev/null 2>&1; }

use_engine() {
    export DOCKER_HOST="$1"
    DOCKER=("$(docker_cli)")
}

# An engine that already answers (DOCKER_HOST, the system socket, or ours from
# an earlier `up`), else our own dockerd with the flags this machine kind
# allows: vfs storage, no iptables, no bridge (containers use host networking).
ensure_engine() {
    local host
    for host in "${DOCKER_HOST:-}" unix:///var/run/docker.sock "${OWN_DOCKER_HOST}"; do
        if engine_at "${host}"; then
            use_engine "${host}"
            return 0
        fi
    done
    if ! command -v dockerd >/dev/null || ! command -v "$(docker_cli)" >/dev/null; then
        install_packages docker.io
    fi
    mkdir -p "${DOCKER_DIR}/data" "${DOCKER_DIR}/exec"
    log "starting dockerd (images cached in ${DOCKER_DIR}/data)"
    spawn dockerd "${HOST_DIR}/dockerd.out" dockerd --data-root "${DOCKER_DIR}/data" \
        --exec-root "${DOCKER_DIR}/exec" -H "${OWN_DOCKER_HOST}" \
        --pidfile "${DOCKER_DIR}/dockerd.pid" --storage-driver=vfs \
        --iptables=false --ip6tables=false --bridge=none
    wait_for 60 engine_at "${OWN_DOCKER_HOST}" || {
        tail -n 20 "${HOST_DIR}/dockerd.out" >&2
        die "dockerd did not answer on ${OWN_DOCKER_HOST}"
    }
    use_engine "${OWN_DOCKER_HOST}"
}

# A stopped dockerd leaves its network namespace mounted in its exec root;
# once ours no longer answers, nothing of it may stay mounted.
release_engine_mounts() {
    engine_at "${OWN_DOCKER_HOST}" && return 0
    local target
    findmnt -rn -o TARGET | grep "^${DOCKER_DIR}/exec/" | sort -r | while read -r target; do
        umount "${target}" 2>/dev/null || umount -l "${target}" || true
    done
}

# Tests and tools read which engine serves the cluster from here.
record_engine() { echo "${DOCKER_HOST}" >"${HOST_DIR}/docker-host"; }

suite_of_release() {
    case "$1" in
    22.05) echo bookworm ;;
    24.11) echo trixie ;;
    *) die "unknown Slurm release $1 (22.05 or 24.11)" ;;
    esac
}

# The image to build FROM: HOPS_DOCKER_BASE if given, Debian's public image if
# a registry serves it, else the imported debootstrap root of the suite.
base_image() {
    local suite="$1" public="debian:$1-slim" tag="hops-rootfs:$1" root stamp
    if [[ -n "${HOPS_DOCKER_BASE:-}" ]]; then
        echo "${HOPS_DOCKER_BASE}"
        return
    fi
    if "${DOCKER[@]}" image inspect "${public}" >/dev/null 2>&1 ||
        timeout 120 "${DOCKER[@]}" pull -q "${public}" >/dev/null 2>&1; then
        echo "${public}"
        return
    fi
    root="$(bash "${SCRIPT_DIR}/rootfs.sh" "${suite}")"
    stamp="$(sha256sum "${root}/.hops-rootfs" | cut -c1-16)"
    if [[ "$("${DOCKER[@]}" image inspect -f '{{index .Config.Labels "org.hops.rootfs"}}' \
        "${tag}" 2>/dev/null)" != "${stamp}" ]]; then
        log "no registry: importing the ${suite} root as ${tag}"
        bash "${SCRIPT_DIR}/rootfs.sh" "${suite}" --tar |
            "${DOCKER[@]}" import --change "LABEL org.hops.rootfs=${stamp}" - "${tag}" >/dev/null
    fi
    echo "${tag}"
}

image_tag() { echo "hops-slurm:${RELEASE}"; }

# The classic builder caches every step, so an unchanged docker/ rebuilds in
# seconds; the build context is this small directory only.
build_image() {
    local base start=${SECONDS}
    base="$(base_image "$(suite_of_release "${RELEASE}")")"
    if ! DOCKER_BUILDKIT=0 "${DOCKER[@]}" build --build-arg "BASE=${base}" \
        --build-arg "SLURM_RELEASE=${RELEASE}" -t "$(image_tag)" "${SCRIPT_DIR}" \
        >"${HOST_DIR}/build.log" 2>&1; then
        tail -n 30 "${HOST_DIR}/build.log" >&2
        die "image build failed (log: ${HOST_DIR}/build.log)"
    fi
    # vfs keeps full copies: drop this image's superseded builds.
    "${DOCKER[@]}" image prune -f --filter "label=org.hops.slurm-release=${RELEASE}" >/dev/null 2>&1 || true
    log "image $(image_tag) from ${base} ready in $((SECONDS - start)) s"
}

# Host paths the container sees at the same place: the state directory, the
# host's munged and MariaDB sockets, its users, /tmp and this repository (test
# jobs run scripts from both, with the repository's .venv interpreter), plus
# HOPS_CONTAINER_MOUNTS (space-separated).
container_mounts() {
    local repo path
    repo="$(cd "${SCRIPT_DIR}/.." && pwd)"
    echo "-v ${CLUSTER_DIR}:${CLUSTER_DIR}"
    echo "-v /run/munge:/run/munge"
    [[ -d /run/mysqld ]] && echo "-v /run/mysqld:/run/mysqld"
    echo "-v /etc/passwd:/etc/passwd:ro"
    echo "-v /etc/group:/etc/group:ro"
    echo "-v /tmp:/tmp"
    echo "-v ${repo}:${repo}:ro"
    path="$(venv_python_prefix)"
    [[ -z "${path}" ]] || echo "-v ${path}:${path}:ro"
    for path in ${HOPS_CONTAINER_MOUNTS:-}; do
        echo "-v ${path}:${path}"
    done
}

container_running() {
    [[ "$("${DOCKER[@]}" inspect -f '{{.State.Running}}' "${CONTAINER_NAME}" 2>/dev/null)" == true ]]
}

container_ready() {
    container_running || return 2
    [[ -f "${CLUSTER_DIR}/container.ready" ]]
}

# Up and answering the host's own Slurm commands (or the release wrappers).
container_healthy() {
    [[ -f "${CONTAINER_MARK}" ]] && container_running && [[ -f "${CLUSTER_DIR}/container.ready" ]] &&
        munge_works && all_nodes_usable
}

remove_container() {
    "${DOCKER[@]}" inspect "${CONTAINER_NAME}" >/dev/null 2>&1 || return 0
    if container_running; then
        # The container's cluster.sh cancels the jobs and stops its daemons on TERM.
        "${DOCKER[@]}" stop -t 90 "${CONTAINER_NAME}" >/dev/null 2>&1 || true
    fi
    "${DOCKER[@]}" rm -f "${CONTAINER_NAME}" >/dev/null 2>&1 || true
}

container_exports() {
    print_exports plain
    if in_root; then
        echo "export PATH=${WRAPPER_DIR}:\$PATH"
    fi
}

cmd_up_container() {
    [[ ${EUID} -eq 0 ]] || die "run as root"
    mkdir -p "${CLUSTER_DIR}" "${HOST_DIR}"
    chmod 755 "${CLUSTER_DIR}"
    PIDS_FILE="${HOST_DIR}/pids"
    # The host keeps Slurm's client (and munge) to talk to the container.
    install_missing slurm-client munge
    ensure_engine
    record_engine
    if in_root; then
        # The host's client is another release: run the container's commands.
        write_exec_wrappers "${DOCKER[@]}" exec -i
        use_wrappers_on_path
    fi
    if container_healthy; then
        log "already up (container ${CONTAINER_NAME})"
        container_exports
        return 0
    fi
    remove_container
    local busy start=${SECONDS}
    busy="$(ports_in_use)"
    [[ -z "${busy}" ]] || die "ports ${busy} are already in use (another Slurm running?)"
    MUNGE_LOG="${HOST_DIR}/munged.out" ensure_munge
    ensure_mariadb || log "MariaDB is not reachable: the container runs without accounting"
    build_image
    local up_start=${SECONDS} mounts
    rm -f "${CLUSTER_DIR}/container.ready" "${CLUSTER_DIR}/pids"
    install_job_submit
    echo "${CONTAINER_NAME}" >"${CONTAINER_MARK}"
    mounts="$(container_mounts)"
    # shellcheck disable=SC2086
    "${DOCKER[@]}" run -d --name "${CONTAINER_NAME}" --label "${CONTAINER_LABEL}=${CTLD_PORT}" \
        --init --network host --stop-timeout 90 \
        -e "HOPS_CLUSTER_DIR=${CLUSTER_DIR}" -e "HOPS_CLUSTER_PORT=${CTLD_PORT}" \
        -e "SLURM_CONF=${SLURM_CONF_PATH}" \
        -e "HOPS_ACCOUNTING=${HOPS_ACCOUNTING:-1}" -e "HOPS_UP_TIMEOUT=${UP_TIMEOUT}" \
        ${mounts} "$(image_tag)" >/dev/null
    if ! wait_for $((UP_TIMEOUT + 30)) container_ready; then
        "${DOCKER[@]}" logs --tail 40 "${CONTAINER_NAME}" >&2 2>&1 || true
        remove_container
        rm -f "${CONTAINER_MARK}" "${CLUSTER_DIR}/pids"
        die "containerised cluster did not come up (logs in ${CLUSTER_DIR}/log)"
    fi
    wait_for 30 all_nodes_usable || die "the host's Slurm commands do not reach the container"
    log "container ${CONTAINER_NAME} up in $((SECONDS - up_start)) s ($((SECONDS - start)) s with the image build)"
    container_exports
}

cmd_down_container() {
    [[ ${EUID} -eq 0 ]] || die "run as root"
    PIDS_FILE="${HOST_DIR}/pids"
    local name
    for name in "${DOCKER_HOST:-}" unix:///var/run/docker.sock "${OWN_DOCKER_HOST}"; do
        if engine_at "${name}"; then
            use_engine "${name}"
            remove_container
            break
        fi
    done
    # The container's PIDs meant nothing on the host: never act on its records.
    rm -f "${CLUSTER_DIR}/pids" "${CLUSTER_DIR}/container.ready" "${CONTAINER_MARK}"
    stop_names munged dockerd
    await_reaped "${STOPPED_PIDS[@]}"
    release_engine_mounts
    rm -f "${PIDS_FILE}" "${HOST_DIR}/docker-host"
    log "down (container ${CONTAINER_NAME} removed; images kept as cache)"
}

# Inside the container: start the cluster, then wait; `docker stop` (TERM)
# cancels the jobs and stops the daemons before the container exits.
cmd_serve() {
    trap 'cmd_down; exit 0' TERM INT
    cmd_up >"${CLUSTER_DIR}/container.up.out"
    touch "${CLUSTER_DIR}/container.ready"
    while true; do
        sleep 3600 &
        wait $! || true
    done
}
