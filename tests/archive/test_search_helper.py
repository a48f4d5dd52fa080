"""A helper process takes requests on their way together (pipelined, over real pipes): each
caller gets its own answer, in the order the requests were written, and those on their way
when the helper dies are done in this process.  Background work runs at a lower priority."""

from __future__ import annotations

import os
import sys
import threading

from wwwproxy.archive.search.helper import HELPER_FAILURES, Helper, lower_priority

#: a helper that answers each request (a list of numbers) with their doubles, slowly, and
#: with how many requests it has read so far (the order it got them in)
SLOW_DOUBLER = (
    "import sys, time\n"
    "from wwwproxy.archive.search.helper import serve\n"
    "seen = []\n"
    "def answer(request):\n"
    "    seen.append(request[0])\n"
    "    time.sleep(0.2)\n"
    "    return [[n * 2, len(seen)] for n in request]\n"
    "serve(answer, sys.stdin.buffer, sys.stdout.buffer)\n"
)
#: a helper that answers its first request, then dies while reading the next
DIES_AFTER_ONE = (
    "import sys\n"
    "from wwwproxy.archive.search import helper\n"
    "request = helper._read(sys.stdin.buffer)\n"
    "helper._write(sys.stdout.buffer, [[n * 2, 1] for n in request])\n"
    "helper._read(sys.stdin.buffer)\n"
    "sys.exit(3)\n"
)


def doubler(script: str) -> Helper[int, list[int]]:
    return Helper(
        "test",
        "unused",
        encode=list,
        decode=lambda values, requests: list(values),  # type: ignore[call-overload]
        local=lambda requests: [[n * 2, 0] for n in requests],  # 0: made here
        argv=[sys.executable, "-c", script],
    )


def test_requests_on_their_way_together_each_get_their_own_answer_in_order():
    helper = doubler(SLOW_DOUBLER)
    try:
        first = helper.send([1, 2])
        second = helper.send([3])  # written while the helper works on the first
        third = helper.send([4])
        assert first is not None and second is not None and third is not None
        results: dict[str, object] = {}
        # the later ones wait for their turn to read, whoever asks first
        late = [
            threading.Thread(target=lambda: results.update(third=helper.receive(third, [4]))),
            threading.Thread(target=lambda: results.update(second=helper.receive(second, [3]))),
        ]
        for t in late:
            t.start()
        results["first"] = helper.receive(first, [1, 2])
        for t in late:
            t.join(30)
        assert results == {"first": [[2, 1], [4, 1]], "second": [[6, 2]], "third": [[8, 3]]}
        assert helper.started == 1 and helper.failures == 0
    finally:
        helper.stop()
    assert helper.pid is None


def test_many_callers_at_once_each_get_their_own_answer():
    helper = doubler(SLOW_DOUBLER.replace("time.sleep(0.2)", "time.sleep(0.001)"))
    results: dict[int, object] = {}
    try:
        threads = [
            threading.Thread(target=lambda n=n: results.update({n: helper.call([n])}))
            for n in range(30)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        helper.stop()
    assert sorted(results) == list(range(30))
    assert all(results[n][0][0] == n * 2 for n in range(30))  # type: ignore[index]
    assert sorted(results[n][0][1] for n in range(30)) == list(range(1, 31))  # type: ignore[index]
    assert helper.failures == 0


def test_requests_on_their_way_when_the_helper_dies_are_done_here():
    helper = doubler(DIES_AFTER_ONE)
    try:
        sent = [helper.send([n]) for n in (1, 2, 3)]
        answers = [helper.receive(s, [n]) for s, n in zip(sent, (1, 2, 3), strict=True)]
        assert answers == [[[2, 1]], [[4, 0]], [[6, 0]]]  # the first from it, then here
        assert helper.failures == 1  # one failure, however many were on their way
        assert helper.call([5]) == [[10, 1]]  # a new helper for the next
        assert helper.started == 2
    finally:
        helper.stop()


def test_a_helper_stopped_with_requests_on_their_way_answers_them_first():
    helper = doubler(SLOW_DOUBLER)
    sent = helper.send([7])
    stopper = threading.Thread(target=helper.stop)
    stopper.start()  # waits for the answer on its way ...
    assert helper.receive(sent, [7]) == [[14, 1]]  # ... which is the helper's
    stopper.join(30)
    assert not stopper.is_alive() and helper.pid is None and helper.failures == 0


def test_a_helper_that_cannot_start_leaves_the_work_here(tmp_path):
    helper = doubler("")
    helper._argv = [str(tmp_path / "no-such-python")]  # noqa: SLF001
    assert helper.send([1]) is None
    assert helper.receive(None, [1]) == [[2, 0]]
    assert helper.failures == HELPER_FAILURES


def test_lower_priority_lowers_the_calling_thread_alone():
    if not sys.platform.startswith("linux"):
        assert lower_priority(5) == 0
        return
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []
    worker = threading.Thread(target=lambda: seen.append(lower_priority(5)))
    worker.start()
    worker.join()
    assert seen == [min(19, before + 5)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
    deep: list[int] = []
    worker = threading.Thread(target=lambda: deep.append(lower_priority(100)))
    worker.start()
    worker.join()
    assert deep == [19]  # no lower than the lowest
