"""The ``hops`` executable: answers ``hops version`` and Tab completion of a command name
without loading typer, else hands over to :mod:`hops_cli.main`.

typer builds every option's converter with pydantic when a command is
constructed (about 0.3 s before a command runs); a version query and the
completion of ``hops st<Tab>`` need none of that. Only bash's completion
protocol of the command name and of ``hops status``'s options is answered
here (one name a line, as typer's bash completion prints it), and ``hops
status`` is run by :mod:`hops_cli.quick` when its options are plain;
everything else goes to typer.
"""

from __future__ import annotations

import os
import sys

#: The commands of ``hops``, in help order; a test checks it against the typer group.
COMMANDS = (
    "version",
    "submit",
    "status",
    "show",
    "history",
    "fairness",
    "cancel",
    "nodes",
    "simulate",
    "replay",
    "db",
)


def quick_answer(argv: list[str], env: os._Environ[str] | dict[str, str]) -> str | None:
    """What to print without typer, or None when typer must run."""
    if env.get("_HOPS_COMPLETE") == "complete_bash":
        words = env.get("COMP_WORDS", "").split()
        try:
            cword = int(env.get("COMP_CWORD", ""))
        except ValueError:
            return None
        if cword != 1 or len(words) > 2:
            from hops_cli.quick import complete_status

            return complete_status(words, cword)
        incomplete = words[1] if len(words) == 2 else ""
        if incomplete.startswith("-"):
            return None
        return "\n".join(c for c in COMMANDS if c.startswith(incomplete))
    if "_HOPS_COMPLETE" not in env and argv in (["version"], ["--version"], ["-V"]):
        import hopsd

        return f"hops {hopsd.__version__}"
    return None


#: The exit status of a command whose reader went away (128 + SIGPIPE, as the shell reports
#: ``squeue | head`` when squeue is stopped by the signal).
EXIT_BROKEN_PIPE = 141


def run() -> None:
    """Entry point of the ``hops`` console script.

    A reader that stops early (``hops status --all | head``) ends the command quietly,
    as it ends ``squeue``: no traceback, and nothing more written to the closed pipe.
    """
    try:
        _run()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit's flush must not fail again
        sys.exit(EXIT_BROKEN_PIPE)


def _run() -> None:
    answer = quick_answer(sys.argv[1:], os.environ)
    if answer is not None:
        sys.stdout.write(answer + "\n" if answer else "")
        sys.exit(0)
    if "_HOPS_COMPLETE" not in os.environ:
        from hops_cli.quick import quick_status

        if quick_status(sys.argv[1:]):
            sys.exit(0)
    from hops_cli.main import app

    app()
