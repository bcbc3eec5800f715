"""hops submit's guard: a job's batch shell outlives the notice that every rank hears."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from hops_cli.notice_guard import guarded_script, is_shell_script, submitted_copy

SCRIPT = """#!/bin/bash
# a training job
#SBATCH -J train
#SBATCH --cpus-per-gpu=2

#SBATCH -t 10
srun python train.py
echo done
"""


def test_the_trap_goes_before_the_first_command_after_every_directive() -> None:
    guarded = guarded_script(SCRIPT, "USR1")
    assert guarded is not None
    lines = guarded.split("\n")
    trap = next(i for i, line in enumerate(lines) if line.startswith("trap '' USR1"))
    assert lines[trap + 1] == "srun python train.py"
    assert all(line.startswith(("#", "")) for line in lines[:trap])
    assert guarded.replace(lines[trap] + "\n", "") == SCRIPT  # nothing else changed


@pytest.mark.parametrize(
    ("first", "shell"),
    [
        ("#!/bin/bash", True),
        ("#!/bin/sh -e", True),
        ("#!/usr/bin/env bash", True),
        ("#!/usr/bin/env -S zsh -f", True),
        ("#!/usr/bin/env python3", False),
        ("#!/usr/bin/python3", False),
        ("echo no shebang", False),
    ],
)
def test_only_shell_scripts_are_guarded(first: str, shell: bool) -> None:
    text = f"{first}\nsleep 1\n"
    assert is_shell_script(text) is shell
    assert (guarded_script(text, "USR1") is not None) is shell


def test_no_notice_signal_means_no_guard() -> None:
    assert guarded_script(SCRIPT, "") is None
    assert guarded_script(SCRIPT, "SIGUSR2") is not None and "trap '' USR2" in str(
        guarded_script(SCRIPT, "SIGUSR2")
    )


def test_the_copy_keeps_the_scripts_name_and_is_removed_after(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    script.chmod(0o750)
    with submitted_copy(script, "USR1") as sent:
        assert sent != script and sent.name == "train.sh"
        assert "trap '' USR1" in sent.read_text()
        # as readable as the original, in a folder others may enter but not list
        assert sent.stat().st_mode & 0o777 == 0o750
        assert sent.parent.stat().st_mode & 0o777 == 0o711
    assert not sent.exists() and script.read_text() == SCRIPT
    python = tmp_path / "train.py"
    python.write_text("#!/usr/bin/env python3\nprint(1)\n")
    with submitted_copy(python, "USR1") as sent:
        assert sent == python


def _run_and_signal(path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``path`` with bash, send its whole process group USR1 as ``scancel --full`` does."""
    proc = subprocess.Popen(
        ["bash", str(path)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    time.sleep(1.0)
    import os

    os.killpg(proc.pid, signal.SIGUSR1)
    out, _ = proc.communicate(timeout=20)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def test_a_guarded_shell_and_its_children_outlive_the_notice_a_probe_still_hears(
    tmp_path: Path,
) -> None:
    """The real thing on bash: unguarded, the shell dies of USR1; guarded, it finishes
    and a Python child that installs a handler (as the probe does) hears the signal."""
    import sys

    child = tmp_path / "child.py"
    child.write_text(
        "import signal, time\n"
        "heard = []\n"
        "signal.signal(signal.SIGUSR1, lambda *a: heard.append(1))\n"
        "end = time.time() + 2\n"
        "while time.time() < end: time.sleep(0.05)\n"
        "print('child heard', len(heard))\n"
    )
    text = f"#!/bin/bash\n#SBATCH -t 1\n{sys.executable} {child}\necho shell survived\n"
    plain = tmp_path / "plain.sh"
    plain.write_text(text)
    died = _run_and_signal(plain)
    assert died.returncode == -signal.SIGUSR1 or died.returncode == 128 + signal.SIGUSR1
    guarded = tmp_path / "guarded.sh"
    guarded.write_text(str(guarded_script(text, "USR1")))
    lived = _run_and_signal(guarded)
    assert lived.returncode == 0 and "shell survived" in lived.stdout
    assert "child heard 1" in lived.stdout
