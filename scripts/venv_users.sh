#!/usr/bin/env bash
# Check that every user can run hops from the virtual environment VENV: its
# Python (a venv links to the interpreter it was made from) must be executable
# by an unprivileged account. A venv made from a Python under a private home
# (pyenv in /root, say) is not; users then get "Permission denied" from the
# `hops` script before hops can say anything. Exits 1 with the fix if so.
set -euo pipefail
venv="${1:?usage: venv_users.sh VENV}"
python="${venv}/bin/python"
real="$(readlink -f "${python}")"
probe_user="${HOPS_PROBE_USER:-nobody}"
if [ "$(id -u)" -ne 0 ]; then
    exit 0  # only root can try as another user; a user's own venv is theirs
fi
if runuser -u "${probe_user}" -- "${python}" -c 'import sys' >/dev/null 2>&1; then
    exit 0
fi
echo "hops: ${venv} is not usable by other users: its Python ${real} is not executable" \
     "by '${probe_user}' (a directory on its path is private)." >&2
echo "hops: make the venv from a Python every user can run, e.g.:" \
     "rm -rf ${venv} && PYTHON=/usr/bin/python3 bash scripts/install.sh" >&2
exit 1
