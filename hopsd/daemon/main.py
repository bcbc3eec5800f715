"""Entry point of ``hopsd``."""

from __future__ import annotations

import sys

import hopsd


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("--version", "version"):
        print(f"hopsd {hopsd.__version__}")
        return 0
    print("hopsd: the scheduling daemon is not available in this build yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
