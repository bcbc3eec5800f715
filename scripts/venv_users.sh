#!/usr/bin/env bash
# Check that every user can run hops from the virtual environment VENV, by
# trying its Python as an unprivileged account (HOPS_PROBE_USER, default
# nobody). A venv's bin/python is a link to the Python it was made from, so
# that account needs search permission on every directory of the venv's path
# and of each link on the way to the interpreter; otherwise users get
# "Permission denied" from `hops` before hops can say anything.
#
# When it cannot, this names the directory that stops it, and the fix depends
# on where that directory is:
# * on the venv's own path (a checkout under a private home such as /root):
#   no other Python helps; the venv must be where users can reach it;
# * on the way to its Python (pyenv's under /root, say): make the venv from a
#   Python every user can run.
# Exits 1 with the fix; 0 when the account can run it, or when not run as root
# (only root can try as another user; a user's own venv is theirs).
set -euo pipefail
venv="${1:?usage: venv_users.sh VENV}"
probe_user="${HOPS_PROBE_USER:-nobody}"
if [ "$(id -u)" -ne 0 ]; then
    exit 0
fi
venv="$(cd "${venv}" && pwd)"  # absolute, as users name it
python="${venv}/bin/python"

as_user() { runuser -u "${probe_user}" -- "$@" >/dev/null 2>&1; }

# The first directory, from / down to the one holding $1 (absolute), that the
# account cannot search; fails when it can search them all.
blocked_dir() {
    local dir=/ rest="${1#/}"
    while :; do
        if ! as_user test -x "${dir}"; then
            echo "${dir}"
            return 0
        fi
        [[ "${rest}" == */* ]] || return 1
        dir="${dir%/}/${rest%%/*}"
        rest="${rest#*/}"
    done
}

# The first directory the account cannot search on the way from the venv's
# link to its interpreter, outside the venv (the venv's own path is checked
# apart); fails when there is none.
blocked_on_the_way() {
    local hop="$1" target n
    for ((n = 0; n < 40; n++)); do
        [ -L "${hop}" ] || return 1
        target="$(readlink "${hop}")"
        [[ "${target}" == /* ]] || target="$(dirname "${hop}")/${target}"
        hop="$(realpath -m -s "${target}")"
        if [[ "${hop}" != "${venv}"/* ]] && blocked_dir "${hop}"; then
            return 0
        fi
    done
    return 1
}

# A Python >= 3.11 the account can run, to make the venv from; empty if none.
public_python() {
    local candidate
    for candidate in /usr/bin/python3 /usr/local/bin/python3; do
        if as_user "${candidate}" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            echo "${candidate}"
            return
        fi
    done
}

describe() { stat -c '%A, owner %U' "$1"; }

if as_user "${python}" -c 'import sys'; then
    exit 0
fi
real="$(readlink -f "${python}")"
echo "hops: ${venv} is not usable by other users ('${probe_user}' cannot run its Python):" >&2
status=0
if blocked="$(blocked_dir "${python}")"; then
    echo "hops: '${probe_user}' cannot enter ${blocked} ($(describe "${blocked}")), on the" \
         "venv's own path; another Python would not help." >&2
    echo "hops: make the venv where every user can reach it: put the hops checkout" \
         "(scripts/install.sh makes .venv in it) or the venv under a directory users can" \
         "traverse, e.g. /opt/hops, and install there again; or let users traverse" \
         "${blocked} (chmod o+x ${blocked}) if that is acceptable." >&2
    status=1
fi
if blocked="$(blocked_on_the_way "${python}")"; then
    fix="$(public_python)"
    echo "hops: '${probe_user}' cannot enter ${blocked} ($(describe "${blocked}")), on the" \
         "way to its Python ${real}." >&2
    if [ -n "${fix}" ]; then
        echo "hops: make the venv from a Python every user can run, e.g. from a hops" \
             "checkout: rm -rf ${venv} && PYTHON=${fix} bash scripts/install.sh; else" \
             "rm -rf ${venv} && ${fix} -m venv ${venv} and install hops into it again." >&2
    else
        echo "hops: make the venv from a Python >= 3.11 every user can run (none found" \
             "in /usr/bin or /usr/local/bin: install Debian's python3)." >&2
    fi
    status=1
fi
if [ "${status}" -eq 0 ] && ! as_user test -x "${real}"; then
    echo "hops: its Python ${real} ($(describe "${real}")) is not executable by" \
         "'${probe_user}'; make the venv from a Python every user can run." >&2
    status=1
fi
if [ "${status}" -eq 0 ]; then
    echo "hops: every directory on the way can be entered; what the Python says as" \
         "'${probe_user}':" >&2
    runuser -u "${probe_user}" -- "${python}" -c 'import sys' 2>&1 | head -n 5 >&2 || true
fi
exit 1
