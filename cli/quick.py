"""``hops status`` without typer: read its options with a small parser, else let typer do it.

typer builds a pydantic converter for every option before a command runs and
imports click, rich and pydantic with it: about 0.25 s, more than the whole
budget of a command that should answer like ``squeue``. :data:`STATUS` lists
the options of :func:`hops_cli.status.status` (a test checks both against each
other and parses the same command lines with both); :func:`parse` reads a
command line with them the way click does, and gives up (None) on anything it
is not sure of: ``--help``, an unknown option, a value that is not a plain
number. typer then runs the command as before and words the error itself, so
usage errors stay what they were.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: How an option takes its value: a flag, one text, repeatable text, one number.
FLAG, TEXT, MANY, NUMBER = "flag", "text", "many", "number"
_NUMBER = re.compile(r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$")


@dataclass(frozen=True)
class Opt:
    """One option: the parameter it fills, its spellings, its kind and default."""

    dest: str
    names: tuple[str, ...]
    kind: str
    default: Any = None


#: The options of ``hops status`` (positional job ids fill ``job_ids``).
STATUS = (
    Opt("jobs", ("--jobs", "-j"), MANY),
    Opt("users", ("--user", "-u"), MANY),
    Opt("me", ("--me",), FLAG, False),
    Opt("states", ("--state", "--states", "-t"), MANY),
    Opt("partitions", ("--partition", "-p"), MANY),
    Opt("all_users", ("--all", "-a"), FLAG, False),
    Opt("fmt", ("--format", "-o"), TEXT),
    Opt("noheader", ("--noheader", "-h"), FLAG, False),
    Opt("parsable", ("--parsable", "-P"), FLAG, False),
    Opt("window_h", ("--window",), NUMBER, 24.0),
    Opt("as_json", ("--json",), FLAG, False),
)
#: The group's own option that may come before the command (``hops -c FILE status``).
CONFIG = Opt("config", ("--config", "-c"), TEXT)


def parse(
    argv: Sequence[str], options: Sequence[Opt], positional: str, given: set[str] | None = None
) -> dict[str, Any] | None:
    """The parameters ``argv`` gives (defaults filled in), or None when typer should parse.

    ``given`` collects the options the command line names (as click tracks them).
    """
    by_name = {name: opt for opt in options for name in opt.names}
    values: dict[str, Any] = {opt.dest: opt.default for opt in options}
    values[positional] = None
    args = list(argv)
    while args:
        word = args.pop(0)
        if word == "--":
            _extend(values, positional, args)
            break
        if word == "--help" or (word.startswith("-") and len(word) > 1 and _taken(word) is None):
            return None
        if not word.startswith("-") or word == "-":
            _extend(values, positional, [word])
            continue
        if not _take(word, args, by_name, values):
            return None
        if given is not None:
            given.update(_named(word, by_name))
    return values


def _named(word: str, by_name: Mapping[str, Opt]) -> set[str]:
    """The options one word read by :func:`_take` names: ``--name[=v]``, or ``-abc`` up to
    the first letter that takes a value."""
    if word.startswith("--"):
        return {by_name[word.partition("=")[0]].dest}
    named = set()
    for letter in word[1:]:
        opt = by_name[f"-{letter}"]
        named.add(opt.dest)
        if opt.kind != FLAG:
            break
    return named


def _taken(word: str) -> str | None:
    """The word itself when it looks like options (``--name[=v]`` or ``-abc``), else None."""
    return word if re.match(r"^(--[a-z][a-z-]*(=.*)?|-[a-zA-Z].*)$", word, re.S) else None


def _take(word: str, rest: list[str], by_name: Mapping[str, Opt], values: dict[str, Any]) -> bool:
    """Consume one option word (and its value from ``rest``); False when not sure how."""
    if word.startswith("--"):
        name, eq, inline = word.partition("=")
        opt = by_name.get(name)
        if opt is None or (opt.kind == FLAG and eq):
            return False
        return _store(opt, inline if eq else None, rest, values)
    for k in range(1, len(word)):  # -ah, -ovalue, -o value
        opt = by_name.get(f"-{word[k]}")
        if opt is None:
            return False
        if opt.kind != FLAG:
            return _store(opt, word[k + 1 :] or None, rest, values)
        values[opt.dest] = True
    return True


def _store(opt: Opt, inline: str | None, rest: list[str], values: dict[str, Any]) -> bool:
    if opt.kind == FLAG:
        values[opt.dest] = True
        return True
    if inline is None:
        if not rest:
            return False
        inline = rest.pop(0)
    if opt.kind == NUMBER:
        if not _NUMBER.match(inline):
            return False
        values[opt.dest] = float(inline)
    elif opt.kind == MANY:
        values[opt.dest] = [*(values[opt.dest] or []), inline]
    else:
        values[opt.dest] = inline
    return True


def _extend(values: dict[str, Any], key: str, words: Sequence[str]) -> None:
    if words:
        values[key] = [*(values[key] or []), *words]


def split_config(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """``hops [-c FILE] COMMAND ...`` -> (FILE, [COMMAND, ...]); None for other group options."""
    args = list(argv)
    config = None
    while args and args[0].startswith("-"):
        word = args.pop(0)
        if word in CONFIG.names and args:
            config = args.pop(0)
        elif word.startswith("--config="):
            config = word.partition("=")[2]
        elif word.startswith("-c") and len(word) > 2:
            config = word[2:]
        else:
            return None
    return config, args


def quick_status(argv: Sequence[str]) -> bool:
    """Run ``hops status`` when its command line is plain enough; False: typer must run it."""
    split = split_config(argv)
    if split is None or not split[1] or split[1][0] != "status":
        return False
    values = parse(split[1][1:], STATUS, "job_ids")
    if values is None:
        return False
    from hops_cli.status_report import StatusArgs, show_status

    # Nothing the command builds is freed before it ends, and at 10,000 jobs the
    # collector's passes over its records cost it 0.01-0.04 s.
    gc.disable()
    try:
        show_status(split[0], StatusArgs(**values))
    finally:
        gc.enable()
    return True


def complete_status(words: Sequence[str], cword: int) -> str | None:
    """Tab completion of an option of ``hops status``, one name a line as typer prints it:
    every option not given yet (repeatable ones always), then ``--help``. None (typer
    answers) for anything else: a value, a job id, a command line it cannot read."""
    if len(words) < 2 or words[1] != "status" or not 2 <= cword < len(words) + 1:
        return None
    incomplete = words[cword] if cword < len(words) else ""
    if not incomplete.startswith("-") or any(c in "'\"\\" for w in words for c in w):
        return None
    given: set[str] = set()
    if parse(words[2:cword], STATUS, "job_ids", given) is None:
        return None
    names = [n for opt in STATUS if opt.kind == MANY or opt.dest not in given for n in opt.names]
    return "\n".join(n for n in [*names, "--help"] if n.startswith(incomplete))
