#!/usr/bin/env bash
# Print the Python scripts/install.sh makes the venv from: $PYTHON when set,
# else python3 -- unless, run as root, python3 is one other users cannot run
# (pyenv's under /root, say) and /usr/bin/python3 (>= 3.11) is one they can.
#
# A venv's bin/python links to the path its Python gives as its base
# executable (not resolved: a link in a private directory stays in the way),
# so that path is what `nobody` must be able to run. Another Python cannot help
# when the venv itself is where users cannot reach; scripts/venv_users.sh tells
# that apart once the venv exists.
set -euo pipefail
if [ -n "${PYTHON:-}" ] || [ "$(id -u)" -ne 0 ]; then
    echo "${PYTHON:-python3}"
    exit 0
fi
as_nobody() { runuser -u nobody -- "$@" >/dev/null 2>&1; }
base="$(python3 -c 'import sys; print(sys._base_executable)' 2>/dev/null || true)"
if [ -n "${base}" ] && as_nobody "${base}" -c ''; then
    echo python3
elif as_nobody /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo /usr/bin/python3
else
    echo python3
fi
