from extender.core.api.models import QueueingStrategy
from extender.core.scheduling.queues import MEMOS_KEPT, ClusterQueueQueue, equivalence_key
from tests.builders import WL


def heads_in_order(queue):
    out = []
    while (head := queue.head()) is not None:
        out.append(head.name)
        queue.remove(head.key)
    return out


def test_order_is_priority_then_creation_then_uid():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    for wl in [
        WL("old-low").priority(1).created(1).request("cpu", "1").obj(),
        WL("new-high").priority(9).created(5).request("cpu", "2").obj(),
        WL("b-tie").uid("b").created(3).request("cpu", "1").obj(),
        WL("a-tie").uid("a").created(3).request("cpu", "1").obj(),
        WL("oldest").created(0).request("cpu", "3").obj(),
    ]:
        queue.push(wl)
    assert heads_in_order(queue) == ["new-high", "old-low", "oldest", "a-tie", "b-tie"]


def test_best_effort_steps_aside_for_the_next_shape_until_requeued():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    big1 = WL("big1").created(0).request("cpu", "8").obj()
    big2 = WL("big2").created(1).request("cpu", "8").obj()
    small = WL("small").created(2).request("cpu", "1").obj()
    for wl in (big1, big2, small):
        queue.push(wl)
    assert queue.head().name == "big1"
    queue.mark_inadmissible(big1)
    # big2 has the same shape, so it steps aside with big1 (equivalence hashing).
    assert queue.head().name == "small"
    assert queue.counts() == (1, 2)
    assert queue.requeue_inadmissible() == 2
    assert queue.head().name == "big1"


def test_strict_fifo_keeps_a_blocked_head():
    queue = ClusterQueueQueue(QueueingStrategy.STRICT_FIFO)
    big = WL("big").created(0).request("cpu", "8").obj()
    queue.push(big)
    queue.push(WL("small").created(1).request("cpu", "1").obj())
    queue.mark_inadmissible(big)
    assert queue.head().name == "big"


def test_removed_workloads_never_come_back_as_heads():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    a = WL("a").created(0).request("cpu", "1").obj()
    b = WL("b").created(1).request("cpu", "1").obj()
    queue.push(a)
    queue.push(b)
    queue.remove(a.key)
    assert queue.head().name == "b"
    queue.remove(b.key)
    assert queue.head() is None
    assert len(queue) == 0
    queue.push(a)  # an evicted workload comes back with its original place
    assert queue.head().name == "a"


def test_a_member_removed_from_the_middle_is_skipped_when_the_head_before_it_goes():
    """Its entry stays in the class's heap until it reaches the top: then it is dropped, and
    the head is the next current member, never the removed one."""
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    a, b, c = (WL(name).created(t).request("cpu", "1").obj() for t, name in enumerate("abc"))
    for wl in (a, b, c):
        queue.push(wl)
    queue.remove(b.key)  # not the top: its entry stays
    queue.remove(a.key)  # b's stale entry is on top now
    assert queue.head().name == "c"
    assert queue.class_head(c.key) == c.key
    queue.remove(c.key)
    assert queue.head() is None
    assert len(queue) == 0


def test_a_workload_s_class_head_is_the_first_of_its_equivalence_class():
    from extender.core.api.models import QueueingStrategy
    from extender.core.scheduling.queues import ClusterQueueQueue
    from tests.builders import WL

    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    first = WL("first").request("cpu", "3").created(1).obj()
    second = WL("second").request("cpu", "3").created(2).obj()
    other = WL("other").request("cpu", "1").created(3).obj()
    for workload in (second, other, first):
        queue.push(workload)
    assert queue.class_head(second.key) == first.key  # tried for both: its reason is theirs
    assert queue.class_head(other.key) == other.key  # another shape: a class of its own
    queue.remove(first.key)
    assert queue.class_head(second.key) == second.key
    assert queue.class_head("default/nobody") is None


def test_a_class_emptied_and_refilled_finds_what_was_kept_for_it():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    first = WL("first").created(0).request("cpu", "2").obj()
    queue.push(first)
    queue.memo(first).plan_generation = 7  # as if the scheduler had kept a plan
    queue.remove(first.key)
    successor = WL("successor").created(1).request("cpu", "2").obj()
    queue.push(successor)
    assert queue.memo(successor).plan_generation == 7
    other = WL("other").created(1).request("cpu", "3").obj()
    queue.push(other)
    assert queue.memo(other).plan_generation == -1  # another shape: its own memo


def test_a_class_that_stepped_aside_and_emptied_is_offered_again_when_refilled():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    stuck = WL("stuck").created(0).request("cpu", "8").obj()
    queue.push(stuck)
    assert queue.mark_inadmissible(stuck)
    queue.remove(stuck.key)  # deleted while it stepped aside
    newcomer = WL("newcomer").created(1).request("cpu", "8").obj()
    assert queue.push(newcomer) is not None  # the class is made for it again
    assert queue.head() is newcomer
    assert not queue.is_inadmissible(newcomer.key)


def test_only_the_most_recently_emptied_classes_are_remembered():
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    shapes = [
        WL(f"w{i}").created(i).request("cpu", str(i + 1)).obj() for i in range(MEMOS_KEPT + 1)
    ]
    for wl in shapes:
        queue.push(wl)
        queue.memo(wl).plan_generation = 1
        queue.remove(wl.key)
    again = [WL(f"again{i}").request("cpu", str(i + 1)).obj() for i in (0, MEMOS_KEPT)]
    for wl in again:
        queue.push(wl)
    assert queue.memo(again[0]).plan_generation == -1  # the oldest was forgotten
    assert queue.memo(again[1]).plan_generation == 1


def test_equal_classes_have_equal_keys_and_others_do_not():
    a = WL("a").priority(1).request("cpu", "2").obj()
    b = WL("b").priority(1).request("cpu", "2").obj()
    c = WL("c").priority(2).request("cpu", "2").obj()
    assert equivalence_key(a) == equivalence_key(b)
    assert hash(equivalence_key(a)) == hash(equivalence_key(b))
    assert equivalence_key(a) != equivalence_key(c)
    assert equivalence_key(a) != equivalence_key(a).parts


def test_a_backing_off_workload_counts_as_inadmissible_but_is_never_a_head():
    # Kueue keeps a Workload waiting out its requeueAt among the inadmissible ones: counted
    # in pendingWorkloads, never popped before its backoff ends.
    queue = ClusterQueueQueue(QueueingStrategy.BEST_EFFORT_FIFO)
    urgent = WL("urgent").priority(9).created(0).request("cpu", "1").obj()
    queue.push(urgent)
    queue.hold(urgent)
    queue.push(WL("low").created(1).request("cpu", "1").obj())
    assert queue.counts() == (1, 1)
    assert sorted(w.name for w in queue.workloads()) == ["low", "urgent"]
    assert queue.is_inadmissible(urgent.key)
    assert queue.is_held(urgent.key)
    assert queue.requeue_inadmissible() == 0  # freed quota does not end a backoff
    assert heads_in_order(queue) == ["low"]
    queue.push(urgent)  # its backoff ended: queued again, first by priority
    assert not queue.is_held(urgent.key)
    assert queue.counts() == (1, 0)
    assert queue.head().name == "urgent"
    assert queue.remove(urgent.key) is urgent
    assert queue.counts() == (0, 0)
