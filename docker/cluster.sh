#!/usr/bin/env bash
# Start, stop and inspect the hops Slurm test cluster on this host.
#
# Several `slurmd -N NAME` processes on one host act as the nodes of a small
# heterogeneous GPU cluster (fake GPUs are character devices), with
# slurmctld, munged and slurmdbd (accounting in the local MariaDB). Runs
# natively as root on Debian 12; the Dockerfile next to this script runs the
# very same script inside a container.
#
#   docker/cluster.sh up            start a fresh cluster (idempotent), print exports
#   docker/cluster.sh up --container  the same cluster in a container (container.sh)
#   docker/cluster.sh down          cancel all jobs, stop what `up` started
#   docker/cluster.sh status        sinfo summary and liveness of recorded daemons
#   docker/cluster.sh stop-ctld     stop slurmctld only (jobs keep running)
#   docker/cluster.sh start-ctld    start slurmctld again, keeping its state
#   docker/cluster.sh restart-ctld  stop-ctld + start-ctld
#
# Use: eval "$(docker/cluster.sh up | grep ^export)"
#
# Environment: HOPS_CLUSTER_DIR (state directory, default /var/tmp/hops-cluster),
# HOPS_ACCOUNTING=0 to run without slurmdbd, HOPS_UP_TIMEOUT (seconds, default 60),
# HOPS_MAX_JOB_COUNT, HOPS_MAX_ARRAY_SIZE and HOPS_NODE_CPUS (Slurm's MaxJobCount,
# MaxArraySize and each node's CPUs; defaults 10000, 1001, 8) for scale benchmarks,
# HOPS_CLUSTER_PORT (slurmctld port, default 6817) to run a second cluster
# beside the first one (give it its own HOPS_CLUSTER_DIR too), HOPS_SLURM
# (22.05, the host's, or 24.11 from a Debian trixie root: chroot.sh).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SCRIPT_DIR
readonly CONF_SRC="${SCRIPT_DIR}/conf"
readonly CLUSTER_DIR="${HOPS_CLUSTER_DIR:-/var/tmp/hops-cluster}"
readonly SLURM_CONF_PATH="${CLUSTER_DIR}/slurm.conf"
PIDS_FILE="${CLUSTER_DIR}/pids"
# Daemons (munged, dockerd) that the host starts for a containerised cluster;
# the container's own records stay in PIDS_FILE, which it wipes on each start.
readonly HOST_DIR="${CLUSTER_DIR}/host"
# The Slurm release: 22.05 is this host's own (Debian 12); 24.11 runs from a
# Debian trixie root (a chroot natively, or the image with --container).
RELEASE="${HOPS_SLURM:-}"
readonly CLUSTER_NAME="hops"
# One cluster per port base: slurmctld on it, slurmdbd on +2, nodes from +10.
readonly CTLD_PORT="${HOPS_CLUSTER_PORT:-6817}"
readonly DBD_PORT=$((CTLD_PORT + 2))
readonly NODE_PORT_BASE=$((CTLD_PORT + 10))
if [[ "${CTLD_PORT}" == 6817 ]]; then
    readonly DB_NAME="hops_slurm_acct_db"
else
    readonly DB_NAME="hops_slurm_acct_db_${CTLD_PORT}"
fi
readonly DB_USER="hops_slurm"
readonly DB_PASS="hops_slurm_pw"
readonly UP_TIMEOUT="${HOPS_UP_TIMEOUT:-60}"
# Scale tests (benchmarks/daemon_tick.py): a queue beyond Slurm's default 10000 jobs,
# arrays as large as the queue, and nodes claiming more CPUs (config_overrides) so
# thousands of tiny CPU-only jobs can run at once.
readonly MAX_JOB_COUNT="${HOPS_MAX_JOB_COUNT:-10000}"
readonly MAX_ARRAY_SIZE="${HOPS_MAX_ARRAY_SIZE:-1001}"
readonly NODE_CPUS="${HOPS_NODE_CPUS:-8}"
readonly STOP_GRACE=10
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd)
export SLURM_CONF="${SLURM_CONF_PATH}"

log() { echo "cluster: [$(date +%T.%N | cut -c1-12)] $*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

# ---------------------------------------------------------------- packages

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }

install_packages() {
    log "installing $*"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

install_missing() {
    local missing=() pkg
    for pkg in "$@"; do
        is_installed "${pkg}" || missing+=("${pkg}")
    done
    [[ ${#missing[@]} -eq 0 ]] || install_packages "${missing[@]}"
}

ensure_packages() { install_missing "${PACKAGES[@]}"; }

# The release of this host's own Slurm (installed, else what its apt offers).
host_release() {
    local version codename
    version="$(dpkg-query -W -f='${Version}' slurm-client 2>/dev/null || true)"
    if [[ -n "${version}" ]] && is_installed slurm-client; then
        echo "${version}" | cut -d. -f1,2
        return
    fi
    codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
    case "${codename}" in
    trixie) echo 24.11 ;;
    *) echo 22.05 ;;
    esac
}

# True when the chosen release is not the host's: it then runs from a root.
in_root() { [[ "${RELEASE}" != "${HOST_RELEASE}" ]]; }

# ---------------------------------------------------------------- layout

# Node names in the order they appear in slurm.conf.in (the single source).
node_names() { sed -n 's/^NodeName=\([^ ]*\) .*/\1/p' "${CONF_SRC}/slurm.conf.in"; }

node_port() {
    local wanted="$1" i=0 name
    while read -r name; do
        [[ "${name}" == "${wanted}" ]] && {
            echo $((NODE_PORT_BASE + i))
            return 0
        }
        i=$((i + 1))
    done < <(node_names)
    return 1
}

# Fill @NAME@ markers of a template; extra "KEY=VALUE" pairs add markers.
render() {
    local template="$1" text pair
    shift
    text="$(<"${template}")"
    text="${text//@CLUSTER_DIR@/${CLUSTER_DIR}}"
    text="${text//@CLUSTER_NAME@/${CLUSTER_NAME}}"
    text="${text//@CTLD_PORT@/${CTLD_PORT}}"
    text="${text//@DBD_PORT@/${DBD_PORT}}"
    text="${text//@DB_NAME@/${DB_NAME}}"
    text="${text//@DB_USER@/${DB_USER}}"
    text="${text//@DB_PASS@/${DB_PASS}}"
    text="${text//@SLURM_CONF@/${SLURM_CONF_PATH}}"
    for pair in "$@"; do
        text="${text//@${pair%%=*}@/${pair#*=}}"
    done
    printf '%s\n' "${text}"
}

accounting_block() {
    if [[ "$1" == 1 ]]; then
        local tres="gres/gpu" type
        while read -r type; do
            tres+=",gres/gpu:${type}"
        done < <(sed -n 's/.*Gres=gpu:\([^: ]*\):.*/\1/p' "${CONF_SRC}/slurm.conf.in" | sort -u)
        printf '%s\n' "# Accounting through slurmdbd (sacct)." \
            "AccountingStorageType=accounting_storage/slurmdbd" \
            "AccountingStorageHost=localhost" \
            "AccountingStoragePort=${DBD_PORT}" \
            "AccountingStorageTRES=${tres}" \
            "JobCompType=jobcomp/none"
    else
        printf '%s\n' "# Accounting off (HOPS_ACCOUNTING=0, or slurmdbd could not start): no sacct." \
            "AccountingStorageType=accounting_storage/none"
    fi
}

# Expand "prefix[a-b]" into one path per index.
expand_range() {
    local spec="$1"
    if [[ "${spec}" =~ ^(.*)\[([0-9]+)-([0-9]+)\]$ ]]; then
        local i
        for ((i = BASH_REMATCH[2]; i <= BASH_REMATCH[3]; i++)); do
            echo "${BASH_REMATCH[1]}${i}"
        done
    else
        echo "${spec}"
    fi
}

make_fake_gpus() {
    local spec dev
    while read -r spec; do
        while read -r dev; do
            mkdir -p "$(dirname "${dev}")"
            [[ -c "${dev}" ]] || mknod -m 666 "${dev}" c 1 3
        done < <(expand_range "${spec}")
    done < <(sed -n '/^[^#]/s/.*File=\([^ ]\+\).*/\1/p' "${CLUSTER_DIR}/gres.conf")
}

write_configs() {
    local accounting="$1" ports=() name
    while read -r name; do
        ports+=("PORT_${name}=$(node_port "${name}")")
    done < <(node_names)
    install_job_submit
    local job_submit="# no job_submit.lua here: plain jobs stay plain"
    [[ -f "${CLUSTER_DIR}/job_submit.lua" ]] && job_submit="JobSubmitPlugins=lua"
    render "${CONF_SRC}/slurm.conf.in" "${ports[@]}" \
        "ACCOUNTING=$(accounting_block "${accounting}")" "JOB_SUBMIT=${job_submit}" \
        "AUTH_ALT=$(auth_alt_block)" "MAX_JOB_COUNT=${MAX_JOB_COUNT}" \
        "MAX_ARRAY_SIZE=${MAX_ARRAY_SIZE}" "NODE_CPUS=${NODE_CPUS}" >"${SLURM_CONF_PATH}"
    render "${CONF_SRC}/gres.conf.in" >"${CLUSTER_DIR}/gres.conf"
    (
        umask 077
        render "${CONF_SRC}/slurmdbd.conf.in" >"${CLUSTER_DIR}/slurmdbd.conf"
    )
    chmod 600 "${CLUSTER_DIR}/slurmdbd.conf"
    cp "${CONF_SRC}/node-speed.json" "${CLUSTER_DIR}/node-speed.json"
    if [[ "${RELEASE}" != 22.05 ]]; then
        # Slurm 23.x+ slurmd otherwise fails without a mounted cgroup filesystem.
        echo "CgroupPlugin=disabled" >"${CLUSTER_DIR}/cgroup.conf"
        chmod 644 "${CLUSTER_DIR}/cgroup.conf"
    fi
    render "${CONF_SRC}/task-prolog.sh.in" >"${CLUSTER_DIR}/task-prolog.sh"
    chmod 755 "${CLUSTER_DIR}/task-prolog.sh"
    chmod 644 "${SLURM_CONF_PATH}" "${CLUSTER_DIR}/gres.conf" "${CLUSTER_DIR}/node-speed.json"
    # hops.conf for this cluster: written only once a template exists.
    if [[ -f "${CONF_SRC}/hops.conf.in" ]]; then
        render "${CONF_SRC}/hops.conf.in" >"${CLUSTER_DIR}/hops.conf"
        if in_root; then
            sed -i "s|^command_prefix = \[\]|command_prefix = [\"${WRAPPER_DIR}/slurm-exec\"]|" \
                "${CLUSTER_DIR}/hops.conf"
        fi
        if rest_wanted; then
            sed -i -e "s|^rest_url = \"\"|rest_url = \"$(rest_url)\"|" \
                -e "s|^rest_token_file = \"\"|rest_token_file = \"$(rest_token_path)\"|" \
                "${CLUSTER_DIR}/hops.conf"
        fi
        chmod 644 "${CLUSTER_DIR}/hops.conf"
    fi
}

# Slurm reads job_submit.lua next to slurm.conf. Inside the container the
# repository's contrib/ is absent: the host put the file there before.
install_job_submit() {
    local source="${SCRIPT_DIR}/../contrib/job_submit.lua"
    if [[ -f "${source}" ]]; then
        cp "${source}" "${CLUSTER_DIR}/job_submit.lua"
        chmod 644 "${CLUSTER_DIR}/job_submit.lua"
    fi
}

# Fresh state every `up`: slurmctld -c restarts job ids at 1 anyway.
prepare_dir() {
    mkdir -p "${CLUSTER_DIR}"
    chmod 755 "${CLUSTER_DIR}"
    rm -rf "${CLUSTER_DIR:?}/state" "${CLUSTER_DIR:?}/spool" "${CLUSTER_DIR:?}/run" \
        "${CLUSTER_DIR:?}/log" "${CLUSTER_DIR:?}/dev"
    rm -f "${PIDS_FILE}" "${CLUSTER_DIR}/hops.conf"
    mkdir -p "${CLUSTER_DIR}"/{state,spool,run,log,dev}
    chmod 755 "${CLUSTER_DIR}"/{spool,run,log,dev}
    chmod 700 "${CLUSTER_DIR}/state"
}

# ---------------------------------------------------------------- pid records

record_pid() {
    local name="$1" pid="$2"
    forget_pid "${name}"
    echo "${name} ${pid}" >>"${PIDS_FILE}"
}

forget_pid() {
    [[ -f "${PIDS_FILE}" ]] || return 0
    local tmp="${PIDS_FILE}.tmp"
    grep -v "^$1 " "${PIDS_FILE}" >"${tmp}" || true
    mv "${tmp}" "${PIDS_FILE}"
}

recorded_pid() {
    [[ -f "${PIDS_FILE}" ]] || return 1
    awk -v n="$1" '$1 == n { print $2; found = 1 } END { exit !found }' "${PIDS_FILE}"
}

recorded_names() {
    if [[ -f "${PIDS_FILE}" ]]; then awk '{ print $1 }' "${PIDS_FILE}"; fi
}

is_alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }

# The program a recorded name stands for: slurmd-k80n1 -> slurmd.
program_of() { echo "${1%%-*}"; }

# A recorded PID counts only while it still runs the program it was recorded
# for: after a reboot or a killed session the number may belong to anything.
runs_program() {
    local pid="$1" program="$2" comm
    comm="$(cat "/proc/${pid}/comm" 2>/dev/null)" || return 1
    [[ "${comm}" == "${program}" || "${comm}" == "${program:0:15}" ]]
}

recorded_live_pid() {
    local pid
    pid="$(recorded_pid "$1")" || return 1
    is_alive "${pid}" && runs_program "${pid}" "$(program_of "$1")" && echo "${pid}"
}

name_alive() { recorded_live_pid "$1" >/dev/null; }

# Start a daemon detached from our stdout (so `$(cluster.sh up)` returns) and
# in its own session (so the caller's terminal signals do not reach it).
spawn() {
    local name="$1" logfile="$2"
    shift 2
    # Run from the state directory so no daemon (nor slurmstepd) pins the caller's cwd.
    (cd "${CLUSTER_DIR}" && exec setsid "$@" </dev/null >>"${logfile}" 2>&1) &
    record_pid "${name}" "$!"
    # The PID runs a few exec steps before it is the daemon itself (the
    # subshell, setsid, and in a release root its wrappers); liveness checks
    # must not catch it in between (slurmdbd's once read as dead at birth).
    settle "$!" "$(program_of "${name}")"
    return 0
}

settle() {
    local i
    for ((i = 0; i < 50; i++)); do
        runs_program "$1" "$2" && return 0
        is_alive "$1" || return 0
        sleep 0.1
    done
}

# Stop the named daemons together: SIGTERM, wait up to STOP_GRACE seconds,
# then SIGKILL (a slurmd that lost its controller may ignore SIGTERM).
stop_names() {
    local name pid pids=() i
    for name in "$@"; do
        pid="$(recorded_live_pid "${name}")" || continue
        kill -TERM "${pid}" 2>/dev/null && pids+=("${pid}")
    done
    for ((i = 0; i < STOP_GRACE * 10; i++)); do
        any_alive "${pids[@]}" || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if is_alive "${pid}"; then
            log "pid ${pid} ignored SIGTERM, sending SIGKILL"
            kill -KILL "${pid}" 2>/dev/null || true
        fi
    done
    for ((i = 0; i < 50; i++)); do
        any_alive "${pids[@]}" || break
        sleep 0.1
    done
    for name in "$@"; do
        recorded_pid "${name}" >/dev/null || continue
        name_alive "${name}" || forget_pid "${name}"
    done
    STOPPED_PIDS+=("${pids[@]}")
}
STOPPED_PIDS=()

any_alive() {
    local pid
    for pid in "$@"; do
        is_alive "${pid}" && return 0
    done
    return 1
}

# A stopped daemon is re-parented to init, which reaps it a moment later;
# wait briefly so `pgrep` right after `down` shows no <defunct> entries.
await_reaped() {
    local pid i waiting
    for ((i = 0; i < 30; i++)); do
        waiting=0
        for pid in "$@"; do
            [[ -e "/proc/${pid}" ]] && waiting=1
        done
        ((waiting)) || return 0
        sleep 0.1
    done
}

# ---------------------------------------------------------------- munge

# Any failure is "not yet": unmunge exits 2 while munged is still starting,
# which wait_for would otherwise read as "will never succeed".
munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1 || return 1; }

ensure_munge() {
    munge_works && return 0
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    chmod 755 /run/munge
    [[ -f /etc/munge/munge.key ]] || die "/etc/munge/munge.key is missing (reinstall munge)"
    # munged is the host's service, shared by every cluster on this host (a
    # second cluster on another port, the container's, the 24.11 root): it is
    # started here when missing but never recorded, so no cluster's `down`
    # pulls it from under the others.
    (cd / && exec setsid setpriv --reuid=munge --regid=munge --init-groups munged -F \
        </dev/null >>"${MUNGE_LOG:-${CLUSTER_DIR}/log/munged.out}" 2>&1) &
    wait_for 10 munge_works || die "munged did not come up; see ${CLUSTER_DIR}/log/munged.out"
}

# wait_for SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds;
# status 2 from COMMAND means "will never succeed" and ends the wait at once.
wait_for() {
    local seconds="$1" deadline status
    shift
    deadline=$((SECONDS + seconds))
    while true; do
        status=0
        "$@" || status=$?
        ((status == 0)) && return 0
        ((status == 2 || SECONDS >= deadline)) && return 1
        sleep 0.2
    done
}

# ---------------------------------------------------------------- accounting

# --skip-ssl: MariaDB 11's client (trixie) insists on TLS, the local socket needs none.
mysql_root() { mysql --protocol=socket -u root --skip-ssl "$@"; }

mariadb_works() { mysql_root -e 'SELECT 1' >/dev/null 2>&1; }

ensure_mariadb() {
    mariadb_works && return 0
    [[ -x /usr/sbin/mariadbd ]] || return 1
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld 2>/dev/null || true
    log "starting MariaDB"
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    wait_for 30 mariadb_works
}

reset_accounting_db() {
    mysql_root <<SQL
DROP DATABASE IF EXISTS ${DB_NAME};
CREATE DATABASE ${DB_NAME};
CREATE USER IF NOT EXISTS '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASS}';
ALTER USER '${DB_USER}'@'localhost' IDENTIFIED BY '${DB_PASS}';
GRANT ALL PRIVILEGES ON ${DB_NAME}.* TO '${DB_USER}'@'localhost';
FLUSH PRIVILEGES;
SQL
}

dbd_listening() {
    name_alive slurmdbd || return 2
    port_in_use "${DBD_PORT}"
}

cluster_registered() {
    timeout 10 sacctmgr -i add cluster "${CLUSTER_NAME}" >/dev/null 2>&1 ||
        timeout 10 sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "${CLUSTER_NAME}"
}

# Returns non-zero (leaving no slurmdbd running) when accounting is impossible.
start_accounting() {
    if ! ensure_mariadb; then
        log "accounting disabled: MariaDB is not reachable as root on its local socket"
        return 1
    fi
    if ! reset_accounting_db; then
        log "accounting disabled: could not create database ${DB_NAME}"
        return 1
    fi
    spawn slurmdbd "${CLUSTER_DIR}/log/slurmdbd.out" slurmdbd -D
    # sacctmgr stalls for seconds when slurmdbd is not listening yet: wait first.
    if ! wait_for 30 dbd_listening || ! wait_for 30 cluster_registered; then
        log "accounting disabled: slurmdbd did not answer; last log lines:"
        tail -n 20 "${CLUSTER_DIR}/log/slurmdbd.log" "${CLUSTER_DIR}/log/slurmdbd.out" >&2 || true
        stop_names slurmdbd
        return 1
    fi
}

# ---------------------------------------------------------------- slurm daemons

ctld_answers() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_slurmctld() {
    # "-c" (clear state) only on a fresh `up`; a restart keeps jobs and ids.
    local clear=("$@")
    spawn slurmctld "${CLUSTER_DIR}/log/slurmctld.out" slurmctld -D -i "${clear[@]}" -f "${SLURM_CONF_PATH}"
}

start_slurmds() {
    local name
    while read -r name; do
        mkdir -p "${CLUSTER_DIR}/spool/${name}"
        spawn "slurmd-${name}" "${CLUSTER_DIR}/log/slurmd-${name}.out" \
            slurmd -D -f "${SLURM_CONF_PATH}" -N "${name}"
    done < <(node_names)
}

# "NAME STATE" per node; fails if slurmctld does not answer in time.
node_states() { timeout 8 sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

all_nodes_idle() {
    local states expected
    states="$(node_states)" || return 1
    expected="$(node_names | wc -l)"
    [[ "$(awk '$2 == "idle"' <<<"${states}" | wc -l)" -eq "${expected}" ]]
}

# Every node's slurmd responds: not down, unknown or "*" (not responding).
# Drained nodes count as responding: draining is an admin decision, and a
# fresh `up` must not wipe the jobs of a cluster whose daemons are fine.
all_nodes_usable() {
    local states expected
    states="$(node_states)" || return 1
    expected="$(node_names | wc -l)"
    [[ "$(awk '$2 !~ /[*~#!%$@^-]$/ && $2 !~ /^(down|unknown|fail|future|not_responding)/' \
        <<<"${states}" | wc -l)" -eq "${expected}" ]]
}

show_failure_logs() {
    local f
    for f in "${CLUSTER_DIR}"/log/*; do
        [[ -s "${f}" ]] || continue
        echo "----- ${f} (last lines)" >&2
        grep -iE 'error|fatal|fail' "${f}" | tail -n 8 >&2 || true
        tail -n 4 "${f}" >&2
    done
    echo "----- sinfo" >&2
    timeout 5 sinfo -N -l >&2 || true
}

wait_until_idle() {
    local deadline=$((SECONDS + UP_TIMEOUT))
    while ((SECONDS < deadline)); do
        name_alive slurmctld || {
            log "slurmctld exited during start-up"
            return 1
        }
        all_nodes_idle && return 0
        sleep 0.3
    done
    log "nodes not idle after ${UP_TIMEOUT} s"
    return 1
}

expected_daemons() {
    echo slurmctld
    node_names | sed 's/^/slurmd-/'
    if grep -q '^AccountingStorageType=accounting_storage/slurmdbd' "${SLURM_CONF_PATH}" 2>/dev/null; then
        echo slurmdbd
    fi
    if grep -q '^AuthAltTypes=auth/jwt' "${SLURM_CONF_PATH}" 2>/dev/null; then
        echo slurmrestd
    fi
}

is_healthy() {
    [[ -f "${PIDS_FILE}" && -f "${SLURM_CONF_PATH}" ]] || return 1
    local name
    for name in $(expected_daemons); do
        name_alive "${name}" || return 1
    done
    munge_works && all_nodes_usable
}

# True when a stopped slurmctld (stop-ctld, or a crash) is all that is wrong:
# then `up` restarts just the controller instead of rebuilding the cluster,
# which would wipe the jobs of whoever is testing a controller outage.
only_ctld_down() {
    [[ -f "${PIDS_FILE}" && -f "${SLURM_CONF_PATH}" ]] || return 1
    name_alive slurmctld && return 1
    local name
    for name in $(expected_daemons); do
        [[ "${name}" == slurmctld ]] && continue
        name_alive "${name}" || return 1
    done
    munge_works
}

print_exports() {
    if [[ "${1:-}" != plain ]] && in_root; then
        chroot_exports
        return
    fi
    echo "export SLURM_CONF=${SLURM_CONF_PATH}"
    echo "export HOPS_CLUSTER_DIR=${CLUSTER_DIR}"
    # hops.conf for this cluster (present once docker/conf/hops.conf.in exists).
    if [[ -f "${CLUSTER_DIR}/hops.conf" ]]; then
        echo "export HOPS_CONF=${CLUSTER_DIR}/hops.conf"
    fi
    rest_exports
}

port_in_use() {
    if command -v ss >/dev/null; then
        ss -Hltn "sport = :$1" | grep -q .
    else
        (: </dev/tcp/127.0.0.1/"$1") 2>/dev/null
    fi
}

ports_in_use() {
    local port busy=()
    for port in "${CTLD_PORT}" "${DBD_PORT}" $(seq "${NODE_PORT_BASE}" $((NODE_PORT_BASE + $(node_names | wc -l) - 1))); do
        port_in_use "${port}" && busy+=("${port}")
    done
    [[ ${#busy[@]} -gt 0 ]] && echo "${busy[*]}"
    return 0
}

# ---------------------------------------------------------------- commands

on_failed_up() {
    local status=$?
    trap - EXIT
    log "start-up failed; stopping what was started (logs kept in ${CLUSTER_DIR}/log)"
    cmd_down || true
    exit "${status}"
}

cmd_up() {
    [[ ${EUID} -eq 0 ]] || die "run as root"
    if in_root; then
        # The host only runs munged (and MariaDB); Slurm comes from the root.
        PACKAGES=(munge)
        [[ -f "${WRAPPER_DIR}/slurm-exec" ]] || write_exec_wrappers
        use_wrappers_on_path
    fi
    ensure_packages
    if is_healthy; then
        log "already up"
        print_exports
        return 0
    fi
    if only_ctld_down; then
        log "slurmctld is down but the rest is up; starting it again (state kept)"
        cmd_start_ctld
        print_exports
        return 0
    fi
    [[ -f "${PIDS_FILE}" ]] && {
        log "cluster only partly up; stopping it first"
        cmd_down
    }
    local busy
    busy="$(ports_in_use)"
    [[ -z "${busy}" ]] || die "ports ${busy} are already in use (another Slurm running?)"

    local start=${SECONDS} accounting=1
    # A failed start stops whatever it already launched; the logs stay.
    trap 'on_failed_up' EXIT
    prepare_dir
    # munged first: a root's /run/munge is a bind of the host's, which must exist
    ensure_munge
    log "munge ok"
    if in_root; then
        prepare_root
        write_exec_wrappers
    fi
    [[ "${HOPS_ACCOUNTING:-1}" == 0 ]] && accounting=0
    write_configs "${accounting}"
    make_fake_gpus
    if [[ ${accounting} == 1 ]] && ! start_accounting; then
        accounting=0
        write_configs 0
    fi
    log "accounting $([[ ${accounting} == 1 ]] && echo on || echo off)"
    # A fresh controller counts job ids from 1 again: the test cluster's hops
    # ledger belongs to the incarnation that is gone, so it starts afresh too.
    rm -f "${CLUSTER_DIR}/hops-ledger.sqlite" "${CLUSTER_DIR}/hops-ledger.sqlite-wal" \
        "${CLUSTER_DIR}/hops-ledger.sqlite-shm"
    start_slurmctld -c
    start_slurmds
    if ! wait_until_idle; then
        show_failure_logs
        die "cluster did not come up (state in ${CLUSTER_DIR})"
    fi
    start_slurmrestd
    trap - EXIT
    log "up in $((SECONDS - start)) s: $(node_names | tr '\n' ' ')(accounting: $([[ ${accounting} == 1 ]] && echo on || echo off))"
    print_exports
}

cancel_all_jobs() {
    ctld_answers || return 0
    local ids
    ids="$(timeout 10 squeue -h -o '%i' 2>/dev/null || true)"
    [[ -n "${ids}" ]] || return 0
    # shellcheck disable=SC2086
    timeout 10 scancel ${ids} 2>/dev/null || true
    local deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        [[ -z "$(timeout 5 squeue -h -t all -o '%i %T' 2>/dev/null |
            awk '$2 != "CANCELLED" && $2 != "COMPLETED" && $2 != "FAILED"')" ]] && return 0
        ctld_answers || return 0
        sleep 0.3
    done
    log "jobs still listed after 30 s; stopping anyway"
}

# slurmstepd processes of this cluster: they inherit the working directory
# of their slurmd, which spawn() sets to CLUSTER_DIR.
our_stepds() {
    local pid
    local cwd
    for pid in $(pgrep -x slurmstepd || true); do
        cwd="$(readlink "/proc/${pid}/cwd" 2>/dev/null || true)"
        if [[ "${cwd}" == "${CLUSTER_DIR}" || "${cwd}" == "${CLUSTER_DIR}/root${CLUSTER_DIR}" ]]; then
            echo "${pid}"
        fi
    done
}

no_stepds_left() { [[ -z "$(our_stepds)" ]]; }

descendants() {
    local child
    for child in $(pgrep -P "$1" || true); do
        echo "${child}"
        descendants "${child}"
    done
}

# Steps survive when jobs could not be cancelled (e.g. slurmctld was down):
# kill each slurmstepd of this cluster together with the job processes under it.
kill_left_over_steps() {
    local stepd tree
    for stepd in $(our_stepds); do
        tree="$(descendants "${stepd}")"
        log "killing left-over slurmstepd ${stepd} and its processes ${tree//$'\n'/ }"
        # shellcheck disable=SC2086
        kill -KILL "${stepd}" ${tree} 2>/dev/null || true
        STOPPED_PIDS+=("${stepd}")
    done
}

cmd_down() {
    [[ ${EUID} -eq 0 ]] || die "run as root"
    [[ -f "${PIDS_FILE}" ]] || {
        [[ -f "${MOUNTS_FILE}" ]] && unmount_root
        log "nothing recorded in ${PIDS_FILE}; nothing to stop"
        return 0
    }
    if name_alive slurmctld; then
        cancel_all_jobs
    fi
    # Cancelled steps finish on their own within a moment; give them that.
    wait_for 10 no_stepds_left || true
    # shellcheck disable=SC2046
    stop_names $(recorded_names | grep '^slurmd-' || true)
    kill_left_over_steps
    stop_names slurmrestd
    stop_names slurmctld
    stop_names slurmdbd munged  # munged only where an older cluster recorded it
    await_reaped "${STOPPED_PIDS[@]}"
    local left=() name
    for name in $(recorded_names); do
        name_alive "${name}" && left+=("${name}")
    done
    [[ ${#left[@]} -eq 0 ]] || die "still running: ${left[*]}"
    rm -f "${PIDS_FILE}"
    [[ -f "${MOUNTS_FILE}" ]] && unmount_root
    log "down"
}

cmd_status() {
    local ok=0 name pid
    if [[ ! -f "${PIDS_FILE}" ]]; then
        log "not up (no ${PIDS_FILE})"
        return 1
    fi
    echo "SLURM_CONF=${SLURM_CONF_PATH}"
    timeout 8 sinfo -N -o '%N %P %T %G' 2>/dev/null || {
        echo "sinfo: slurmctld does not answer"
        ok=1
    }
    while read -r name pid; do
        if name_alive "${name}"; then
            echo "${name} ${pid} alive"
        else
            echo "${name} ${pid} DEAD"
            ok=1
        fi
    done <"${PIDS_FILE}"
    is_healthy || ok=1
    [[ ${ok} -eq 0 ]] && echo "healthy" || echo "NOT healthy"
    return "${ok}"
}

cmd_stop_ctld() {
    [[ -f "${PIDS_FILE}" ]] || die "cluster is not up"
    stop_names slurmctld
    await_reaped "${STOPPED_PIDS[@]}"
    name_alive slurmctld && die "slurmctld would not stop"
    log "slurmctld stopped"
}

cmd_start_ctld() {
    [[ -f "${PIDS_FILE}" ]] || die "cluster is not up"
    if name_alive slurmctld; then
        log "slurmctld already running"
        return 0
    fi
    start_slurmctld
    # Nodes show "unknown" until they re-register (a few seconds); callers
    # expect a working cluster once this returns.
    if ! wait_for "${UP_TIMEOUT}" ctld_answers || ! wait_for "${UP_TIMEOUT}" all_nodes_usable; then
        show_failure_logs
        die "slurmctld did not come back with all nodes after restart"
    fi
    log "slurmctld started (state kept)"
}

# shellcheck source=container.sh
source "${SCRIPT_DIR}/container.sh"
# shellcheck source=chroot.sh
source "${SCRIPT_DIR}/chroot.sh"
# shellcheck source=slurmrestd.sh
source "${SCRIPT_DIR}/slurmrestd.sh"

main() {
    HOST_RELEASE="$(host_release)"
    readonly HOST_RELEASE
    [[ -n "${RELEASE}" ]] || RELEASE="${HOST_RELEASE}"
    readonly RELEASE
    case "${1:-}" in
    up)
        if [[ "${2:-}" == --container ]]; then cmd_up_container; else cmd_up; fi
        ;;
    down)
        if [[ -f "${CONTAINER_MARK}" ]]; then cmd_down_container; else cmd_down; fi
        ;;
    serve) cmd_serve ;;
    status) cmd_status ;;
    stop-ctld) cmd_stop_ctld ;;
    start-ctld) cmd_start_ctld ;;
    restart-ctld)
        cmd_stop_ctld
        cmd_start_ctld
        ;;
    *)
        echo "usage: $0 up [--container]|down|status|stop-ctld|start-ctld|restart-ctld" >&2
        exit 2
        ;;
    esac
}

main "$@"
