"""The batch shell of a hops job outlives hops's checkpoint notice.

hopsd gives notice to every process of a job (``scancel --full``, see
:mod:`hopsd.daemon.enact`), so the ranks that ``srun``, ``torchrun`` or the
script itself started hear it wherever they run. A shell dies of a signal it
does not handle, and the job with it: ``srun python train.py`` in a plain
batch script ended FAILED at the first notice. So ``hops submit`` hands sbatch
a copy of a shell script with one line before its first command,
``trap '' USR1``: the shell, and what it starts (``srun``, ``torchrun``,
``tee``), ignore the notice, while a process that wants it (the probe)
catches it anyway, since a handler replaces an inherited ignore. Scripts in
other languages are sent unchanged: their own process is the job.
"""

from __future__ import annotations

import re
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

_SHELLS = {"sh", "bash", "dash", "ksh", "zsh", "mksh"}
GUARD_MARK = "# hops: this shell outlives hops's checkpoint notice"


def is_shell_script(text: str) -> bool:
    """True when the script's ``#!`` line names a POSIX-style shell (also via ``env``)."""
    first = text.split("\n", 1)[0].strip()
    if not first.startswith("#!"):
        return False
    words = first[2:].split()
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return bool(words) and Path(words[0]).name in _SHELLS


def first_command_index(lines: Sequence[str]) -> int:
    """Index of the first line sbatch would stop reading ``#SBATCH`` lines at (or the end)."""
    for index, line in enumerate(lines):
        stripped = line.strip()
        if index == 0 and stripped.startswith("#!"):
            continue
        if stripped and not stripped.startswith("#"):
            return index
    return len(lines)


def guarded_script(text: str, signal: str) -> str | None:
    """``text`` with ``trap '' SIGNAL`` before its first command; None if nothing to guard.

    Nothing to guard: no notice signal, or not a shell script. The line goes
    after the ``#SBATCH`` block, so every directive still counts.
    """
    name = signal.strip().upper().removeprefix("SIG")
    if not re.fullmatch(r"[A-Z0-9]{1,8}", name) or not is_shell_script(text):
        return None
    lines = text.split("\n")
    at = first_command_index(lines)
    lines.insert(at, f"trap '' {name}  {GUARD_MARK} (hops submit --help)")
    return "\n".join(lines)


@contextmanager
def submitted_copy(path: Path, signal: str) -> Iterator[Path]:
    """The script sbatch should read: a guarded private copy, or ``path`` itself.

    sbatch keeps the script's text, not its path, so the copy is removed once
    the submission is over. The copy keeps the original's file name, which
    sbatch takes as the job's name when none is given.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OSError(f"{path}: cannot read script: {exc}") from exc
    guarded = guarded_script(text, signal)
    if guarded is None:
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="hops-submit-"))
    try:
        # sbatch may run as another identity than this process (an operator's
        # ``hops submit`` for a user): the copy is exactly as readable as the
        # original, in a folder others may enter but not list.
        folder.chmod(0o711)
        copy = folder / path.name
        copy.write_text(guarded, encoding="utf-8")
        copy.chmod(stat.S_IMODE(path.stat().st_mode) | stat.S_IRUSR)
        yield copy
    finally:
        shutil.rmtree(folder, ignore_errors=True)
