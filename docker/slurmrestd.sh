# shellcheck shell=bash
# slurmrestd with JWT authentication beside the test cluster, sourced by
# cluster.sh and using its helpers.
#
# Why: some centres let a scheduler reach Slurm only through slurmrestd; hops's
# REST backend ([slurm] backend = "rest") is tested against this one. It runs
# where Slurm's auth/jwt plugin is installed: the 24.11 root has it (Debian's
# slurm-wlm-jwt-plugin); the host's 22.05 (slurmrestd v0.0.36-38, other JSON
# shapes) does not take part. slurmctld gets AuthAltTypes=auth/jwt with a key
# made once per cluster directory; `up` writes a token for root that the tests
# and hops.conf use, and prints where slurmrestd listens.

readonly REST_PORT=$((CTLD_PORT + 4))
readonly JWT_KEY="${CLUSTER_DIR}/jwt.key"
readonly REST_TOKEN_FILE="${CLUSTER_DIR}/slurmrestd.jwt"
# A day: longer than any test run; renew with `up` (the REST backend rereads it).
readonly REST_TOKEN_LIFESPAN=86400

# The auth/jwt plugin of the Slurm that runs this cluster (in its root if any).
jwt_plugin_present() {
    local root=""
    in_root && root="${ROOT_DIR}"
    compgen -G "${root}/usr/lib/*/slurm-wlm/auth_jwt.so" >/dev/null
}

# Only natively from a root: inside a container the host's wrappers are docker exec.
rest_wanted() { in_root && jwt_plugin_present; }

auth_alt_block() {
    if rest_wanted; then
        make_jwt_key
        printf '%s\n' "# JWT for slurmrestd (docker/slurmrestd.sh)." "AuthAltTypes=auth/jwt" \
            "AuthAltParameters=jwt_key=${JWT_KEY}"
    else
        echo "# No auth/jwt here: no slurmrestd on this cluster."
    fi
}

make_jwt_key() {
    [[ -s "${JWT_KEY}" ]] && return 0
    (
        umask 077
        head -c 32 /dev/urandom >"${JWT_KEY}"
    )
    chmod 600 "${JWT_KEY}"
}

rest_url() { rest_wanted && echo "http://127.0.0.1:${REST_PORT}"; return 0; }

rest_token_path() { rest_wanted && echo "${REST_TOKEN_FILE}"; return 0; }

rest_listening() {
    name_alive slurmrestd || return 2
    port_in_use "${REST_PORT}"
}

write_rest_token() {
    local token
    token="$(timeout 10 scontrol token username=root lifespan="${REST_TOKEN_LIFESPAN}")" || return 1
    (
        umask 077
        echo "${token#SLURM_JWT=}" >"${REST_TOKEN_FILE}.tmp"
    )
    mv "${REST_TOKEN_FILE}.tmp" "${REST_TOKEN_FILE}"
}

# slurmrestd refuses to run as root: it drops to nobody. SLURM_JWT=daemon makes
# it take each client's token (without it every token is "rejected").
start_slurmrestd() {
    rest_wanted || return 0
    port_in_use "${REST_PORT}" && die "port ${REST_PORT} (slurmrestd) is already in use"
    spawn slurmrestd "${CLUSTER_DIR}/log/slurmrestd.out" env SLURM_JWT=daemon \
        slurmrestd -u nobody -g nogroup -a rest_auth/jwt -s openapi/slurmctld \
        "127.0.0.1:${REST_PORT}"
    wait_for 20 rest_listening || {
        tail -n 20 "${CLUSTER_DIR}/log/slurmrestd.out" >&2 || true
        die "slurmrestd did not listen on ${REST_PORT}"
    }
    write_rest_token || die "scontrol token failed (is AuthAltTypes=auth/jwt in slurm.conf?)"
    log "slurmrestd on 127.0.0.1:${REST_PORT} (token in ${REST_TOKEN_FILE})"
}

rest_exports() {
    [[ -s "${REST_TOKEN_FILE}" ]] && name_alive slurmrestd || return 0
    echo "export HOPS_SLURMRESTD_URL=http://127.0.0.1:${REST_PORT}"
    echo "export HOPS_SLURMRESTD_TOKEN_FILE=${REST_TOKEN_FILE}"
}
