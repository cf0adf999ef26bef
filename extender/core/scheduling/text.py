"""Messages whose words are made when first read, after the cycle that judged their heads.

A cycle judges a thousand heads that wait; only the status writer reads why each one waits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class Lazy:
    """A message made on first use, by `make(*args)`, from values captured when the Lazy was
    made (never from state that changes later: a kept verdict's message must still say what
    was true when it was judged). Never empty, so it is true without being made. Equal to
    the str it makes, and hashed as it."""

    __slots__ = ("_args", "_make", "_text")

    def __init__(self, make: Callable[..., str], *args: object) -> None:
        self._make: Callable[..., str] | None = make
        self._args = args
        self._text = ""

    def __str__(self) -> str:
        make = self._make
        if make is not None:
            self._text = make(*self._args)
            self._make, self._args = None, ()
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, Lazy)):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return repr(str(self))

    def __add__(self, other: Text) -> Lazy:
        return Lazy(_joined, "", (self, other))

    def __radd__(self, other: Text) -> Lazy:
        return Lazy(_joined, "", (other, self))


Text = str | Lazy
"""A message, made already or when first read."""


def join(separator: str, parts: Sequence[Text]) -> Text:
    """`separator.join(parts)`, made when first read if any part is."""
    if len(parts) == 1:
        return parts[0]
    for part in parts:
        if type(part) is not str:
            return Lazy(_joined, separator, tuple(parts))
    return separator.join(parts)  # type: ignore[arg-type]


def _joined(separator: str, parts: tuple[Text, ...]) -> str:
    return separator.join(map(str, parts))
