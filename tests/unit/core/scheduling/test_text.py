"""Messages made when first read: equal to their words, made once, true to when they were made."""

from __future__ import annotations

import pytest

from extender.core.scheduling.reasons import PendingStatus
from extender.core.scheduling.text import Lazy, join
from tests.unit.core.scheduling.test_verdicts import _assume, _build, _setup


class Making:
    """A maker that counts how often it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *words: str) -> str:
        self.calls += 1
        return " ".join(words)


@pytest.mark.parametrize(
    ("parts", "expected", "lazy"),
    [
        ((), "", False),
        (("a",), "a", False),
        (("a", "b"), "a; b", False),
        ((Lazy(str, "x"),), "x", True),
        (("a", Lazy(str, "x"), "b"), "a; x; b", True),
        ((Lazy(str, "x"), Lazy(str, "y")), "x; y", True),
    ],
)
def test_join_is_made_when_read_only_if_a_part_is(parts, expected, lazy):
    joined = join("; ", parts)
    assert isinstance(joined, Lazy) is lazy
    assert str(joined) == expected
    assert joined == expected
    assert expected == joined


def test_a_lazy_message_is_made_once_and_behaves_as_its_words():
    making = Making()
    message = Lazy(making, "needs", "5", "cpu")
    assert making.calls == 0
    assert message  # true without being made: a Lazy is never empty
    assert making.calls == 0
    assert f"{message}!" == "needs 5 cpu!"
    assert str(message) == "needs 5 cpu"
    assert message == Lazy(str, "needs 5 cpu")
    assert message != "needs 6 cpu"
    assert hash(message) == hash("needs 5 cpu")
    assert repr(message) == repr("needs 5 cpu")
    assert "x; " + message == "x; needs 5 cpu"
    assert message + "; y" == "needs 5 cpu; y"
    assert making.calls == 1
    assert message.__eq__(5) is NotImplemented


def test_a_pending_status_reads_as_words_and_compares_with_a_made_one():
    made = PendingStatus("WaitingForQuota", "needs 5 cpu")
    lazy = PendingStatus("WaitingForQuota", Lazy(str, "needs 5 cpu"))
    assert lazy.message == "needs 5 cpu"
    assert type(lazy.message) is str
    assert lazy == made
    assert hash(lazy) == hash(made)
    assert lazy != PendingStatus("Pending", "needs 5 cpu")


def test_a_waiting_heads_message_read_later_says_what_was_true_when_it_was_judged():
    # Two states alike; one reads its head's message at once, the other only after more
    # usage arrived in the cohort: the words are the same, the numbers those of the cycle.
    read_now, read_later = _build(), _build()
    for state in (read_now, read_later):
        _setup(state)
    now = {w.key: status.message for w, status in read_now.schedule(1.0).pending}
    later = read_later.schedule(1.0).pending
    _assume(read_later, "b-more", "b", "2", 0)  # the cohort's 2 free cpu are gone
    assert {w.key: status.message for w, status in later} == now
    assert "2 free to a" in now["default/head"], now
