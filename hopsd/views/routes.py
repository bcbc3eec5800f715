"""What hopsd's HTTP endpoint serves besides ``/metrics``: fixed pages and families of pages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: A page's answer: its content type and body.
Document = tuple[str, bytes]
#: A read-only page at one path.
Page = Callable[[], Document]


@dataclass(frozen=True)
class Under:
    """The pages below a path ending in ``/`` (``/job/`` + an id): ``answer`` takes the
    rest of the path and returns the document, or None for a page that is not there."""

    answer: Callable[[str], Document | None]


class NotThere(Exception):
    """Raised by a page of an :class:`Under` that does not exist (answered 404)."""
