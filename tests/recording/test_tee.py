"""The tee's decisions as playbooks: each a run of events fed to a :class:`Tee` and the
commands it must answer with, step by step, without sockets.  Together they take every
transition of :data:`ACCEPTS` (checked below); every other event in every phase is an error."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from wwwproxy.config import Config
from wwwproxy.recording.tee import (
    ACCEPTS,
    WHOLE_AT_ONCE,
    BodyEnded,
    Chunk,
    Client,
    Command,
    Drop,
    End,
    Event,
    Finish,
    GoOn,
    Phase,
    Read,
    Record,
    Recorded,
    Send,
    Started,
    Tee,
    TeeError,
    UpstreamFailed,
    Wrote,
)

ALWAYS = GoOn()  # finish_on_disconnect with no limits
NEVER = GoOn(finish_on_disconnect=False)
OPEN, GONE, NONE = Client.OPEN, Client.GONE, Client.NONE


@dataclass
class Play:
    """A playbook: the tee's settings, then (event, the commands it answers) in turn, and
    what the tee says at the end."""

    steps: list[tuple[Event, list[Command]]]
    expected: int | None = None
    go_on: GoOn = ALWAYS
    keep: int = 0
    complete: bool = False
    recorded: bool = False
    body: bytes | None = None
    received: int | None = None  # None: the sum of the chunks
    covered: set[tuple[Phase, type]] = field(default_factory=set)

    def run(self) -> Tee:
        tee = Tee(self.expected, self.go_on, keep=self.keep)
        for number, (event, commands) in enumerate(self.steps):
            self.covered.add((tee.phase, type(event)))
            assert tee.feed(event) == commands, f"step {number}: {event}"
        assert tee.phase is Phase.DONE
        return tee


def body_of(*parts: bytes) -> list[tuple[Event, list[Command]]]:
    """The steps of parts that each go to an open browser in full."""
    steps: list[tuple[Event, list[Command]]] = []
    for part in parts:
        steps += [(Chunk(part), [Record(part), Send(part)]), (Wrote(True), [Read()])]
    return steps


LARGE = b"x" * (WHOLE_AT_ONCE + 1)

PLAYBOOKS = {
    # --- the browser stays ---------------------------------------------------------------
    "chunked body: each part at once, the end once recorded": Play(
        [
            (Started(OPEN), [Read()]),
            *body_of(b"ab", b"cd"),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [End(True)]),
        ],
        complete=True,
        recorded=True,
    ),
    "Content-Length body: its last byte held back until recorded": Play(
        [
            (Started(OPEN), [Read()]),
            *body_of(b"abc"),
            (Chunk(b"de"), [Record(b"de"), Send(b"d")]),
            (Wrote(True), [Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [Send(b"e")]),
            (Wrote(True), [End(True)]),
        ],
        expected=5,
        complete=True,
        recorded=True,
    ),
    "a last part of one byte: nothing to send until recorded": Play(
        [
            (Started(OPEN), [Read()]),
            *body_of(b"ab"),
            (Chunk(b"c"), [Record(b"c"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [Send(b"c")]),
            (Wrote(True), [End(True)]),
        ],
        expected=3,
        complete=True,
        recorded=True,
    ),
    "a small body in one part: held whole, one write once recorded": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"abc"), [Record(b"abc"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [Send(b"abc")]),
            (Wrote(True), [End(True)]),
        ],
        expected=3,
        complete=True,
        recorded=True,
    ),
    "a larger body in one part: all but its last byte at once": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(LARGE), [Record(LARGE), Send(LARGE[:-1])]),
            (Wrote(True), [Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [Send(LARGE[-1:])]),
            (Wrote(True), [End(True)]),
        ],
        expected=len(LARGE),
        complete=True,
        recorded=True,
    ),
    "an empty body (Content-Length: 0)": Play(
        [(Started(OPEN), [Read()]), (BodyEnded(), [Finish()]), (Recorded(True), [End(True)])],
        expected=0,
        complete=True,
        recorded=True,
    ),
    "the archive fails: the browser still gets all of it": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"abc"), [Record(b"abc"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(False), [Send(b"abc")]),
            (Wrote(True), [End(True)]),
        ],
        expected=3,
        complete=True,
    ),
    # --- no browser (the crawler, the queue) ---------------------------------------------
    "no browser: recorded only": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (Chunk(b"c"), [Record(b"c"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        expected=3,
        go_on=NEVER,  # there is no browser to leave
        complete=True,
        recorded=True,
    ),
    "no browser, the archive fails": Play(
        [(Started(NONE), [Read()]), (BodyEnded(), [Finish()]), (Recorded(False), [])],
        complete=True,
    ),
    # --- the browser leaves --------------------------------------------------------------
    "gone before the head, finished": Play(
        [
            (Started(GONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        complete=True,
        recorded=True,
    ),
    "gone before the head, not finished": Play(
        [(Started(GONE), [Read()]), (Chunk(b"ab"), [Record(b"ab"), Drop(browser_left=True)])],
        go_on=NEVER,
    ),
    "gone before an empty body: nothing to leave": Play(
        [(Started(GONE), [Read()]), (BodyEnded(), [Finish()]), (Recorded(True), [])],
        go_on=NEVER,
        complete=True,
        recorded=True,
    ),
    "leaves at a write, finished": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Send(b"ab")]),
            (Wrote(False), [Read()]),
            (Chunk(b"cd"), [Record(b"cd"), Read()]),  # never sent again
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),  # nor the held byte, nor the end
        ],
        expected=4,
        complete=True,
        recorded=True,
    ),
    "leaves at a write, not finished": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Send(b"ab")]),
            (Wrote(False), [Drop(browser_left=True)]),
        ],
        expected=4,
        go_on=NEVER,
    ),
    "leaves as the held end goes out": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), [Send(b"ab")]),
            (Wrote(False), []),
        ],
        expected=2,
        go_on=NEVER,  # recorded already: too late to drop
        complete=True,
        recorded=True,
    ),
    # --- the body fails upstream ---------------------------------------------------------
    "fails midway: dropped, cut off for the browser": Play(
        [
            (Started(OPEN), [Read()]),
            *body_of(b"ab"),
            (UpstreamFailed(), [Drop(browser_left=False), End(False)]),
        ],
        expected=10,
    ),
    "fails while a part goes out": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Send(b"ab")]),
            (UpstreamFailed(), [Drop(browser_left=False), End(False)]),
        ],
    ),
    "fails after its last byte: that byte goes, then the cut": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(LARGE), [Record(LARGE), Send(LARGE[:-1])]),
            (Wrote(True), [Read()]),
            (UpstreamFailed(), [Drop(browser_left=False), Send(LARGE[-1:])]),
            (Wrote(True), [End(False)]),
        ],
        expected=len(LARGE),
    ),
    "fails after a small body held whole: it goes, then the cut": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (UpstreamFailed(), [Drop(browser_left=False), Send(b"ab")]),
            (Wrote(True), [End(False)]),
        ],
        expected=2,
    ),
    "fails before any body": Play(
        [(Started(OPEN), [Read()]), (UpstreamFailed(), [Drop(browser_left=False), End(False)])],
    ),
    "fails with no browser": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (UpstreamFailed(), [Drop(browser_left=False)]),
        ],
    ),
    "fails after the browser left": Play(
        [
            (Started(GONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (UpstreamFailed(), [Drop(browser_left=False)]),
        ],
    ),
    # --- the limits of finish_on_disconnect, asked at each part after the browser left -------
    "known length at most max_bytes: finished": Play(
        [
            (Started(GONE), [Read()]),
            (Chunk(b"a"), [Record(b"a"), Read()]),
            (Chunk(b"bcd"), [Record(b"bcd"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        expected=4,
        go_on=GoOn(max_bytes=4),
        complete=True,
        recorded=True,
    ),
    "known length over max_bytes: cut at once": Play(
        [(Started(GONE), [Read()]), (Chunk(b"a"), [Record(b"a"), Drop(browser_left=True)])],
        expected=5,
        go_on=GoOn(max_bytes=4),
    ),
    "unknown length: cut once it passes max_bytes": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Send(b"ab")]),
            (Wrote(False), [Read()]),
            (Chunk(b"cd"), [Record(b"cd"), Read()]),  # 4: at the bound
            (Chunk(b"e"), [Record(b"e"), Drop(browser_left=True)]),  # 5: past it
        ],
        go_on=GoOn(max_bytes=4),
    ),
    "percent: cut one byte short of it": Play(
        [(Started(GONE), [Read()]), (Chunk(b"x" * 49), [Record(b"x" * 49), Drop(True)])],
        expected=100,
        go_on=GoOn(percent=50),
    ),
    "percent: finished once reached": Play(
        [
            (Started(OPEN), [Read()]),
            (Chunk(b"x" * 50), [Record(b"x" * 50), Send(b"x" * 50)]),
            (Wrote(False), [Read()]),
            (Chunk(b"y" * 50), [Record(b"y" * 50), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        expected=100,
        go_on=GoOn(percent=50),
        complete=True,
        recorded=True,
    ),
    "percent means nothing without a length": Play(
        [(Started(GONE), [Read()]), (Chunk(b"x" * 99), [Record(b"x" * 99), Drop(True)])],
        go_on=GoOn(percent=1),
    ),
    # --- the body kept for the crawler (keep) --------------------------------------------
    "kept: a body up to keep": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (Chunk(b"c"), [Record(b"c"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        keep=3,
        complete=True,
        recorded=True,
        body=b"abc",
    ),
    "not kept: a body over keep": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"abcd"), [Record(b"abcd"), Read()]),
            (BodyEnded(), [Finish()]),
            (Recorded(True), []),
        ],
        keep=3,
        complete=True,
        recorded=True,
    ),
    "not kept: announced over keep": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (BodyEnded(), [Finish()]),  # shorter than announced: aiohttp's to refuse
            (Recorded(True), []),
        ],
        expected=4,
        keep=3,
        complete=True,
        recorded=True,
    ),
    "not kept: a body that failed": Play(
        [
            (Started(NONE), [Read()]),
            (Chunk(b"ab"), [Record(b"ab"), Read()]),
            (UpstreamFailed(), [Drop(browser_left=False)]),
        ],
        keep=3,
    ),
}


@pytest.mark.parametrize("play", PLAYBOOKS.values(), ids=PLAYBOOKS.keys())
def test_playbook(play: Play) -> None:
    tee = play.run()
    chunks = [e.data for e, _ in play.steps if isinstance(e, Chunk)]
    assert tee.received == (play.received if play.received is not None else len(b"".join(chunks)))
    assert (tee.complete, tee.recorded, tee.body) == (play.complete, play.recorded, play.body)


def test_the_playbooks_take_every_transition() -> None:
    covered: set[tuple[Phase, type]] = set()
    for play in PLAYBOOKS.values():
        play.run()
        covered |= play.covered
    every = {(phase, event) for phase, events in ACCEPTS.items() for event in events}
    assert covered == every


def test_what_is_sent_and_recorded_is_the_body_in_order() -> None:
    """Across a run, the browser gets exactly the recorded bytes, in order, and the last of
    them only after Finish."""
    tee = Tee(7, ALWAYS)
    commands = tee.feed(Started(OPEN))
    sent, recorded, finished_before_last = [], [], None
    parts = iter([b"ab", b"cde", b"fg"])
    while commands:
        reply: Event | None = None
        for command in commands:
            match command:
                case Read():
                    part = next(parts, None)
                    reply = Chunk(part) if part is not None else BodyEnded()
                case Record(data):
                    recorded.append(data)
                case Send(data):
                    sent.append(data)
                    if len(b"".join(sent)) == 7:
                        finished_before_last = tee.phase is Phase.FLUSHING
                    reply = Wrote(True)
                case Finish():
                    reply = Recorded(True)
        commands = tee.feed(reply) if reply is not None else []
    assert b"".join(sent) == b"".join(recorded) == b"abcdefg"
    assert finished_before_last


EVENTS: list[Event] = [
    Started(OPEN),
    Chunk(b"x"),
    Wrote(True),
    BodyEnded(),
    UpstreamFailed(),
    Recorded(True),
]

#: a way into each phase
INTO: dict[Phase, list[Event]] = {
    Phase.START: [],
    Phase.READING: [Started(OPEN)],
    Phase.WRITING: [Started(OPEN), Chunk(LARGE)],
    Phase.FINISHING: [Started(OPEN), BodyEnded()],
    Phase.FLUSHING: [Started(OPEN), Chunk(b"a"), BodyEnded(), Recorded(True)],
    Phase.DONE: [Started(OPEN), BodyEnded(), Recorded(True)],
}


@pytest.mark.parametrize(
    ("phase", "event"),
    [(p, e) for p in Phase for e in EVENTS if type(e) not in ACCEPTS[p]],
    ids=lambda v: v.name if isinstance(v, Phase) else type(v).__name__,
)
def test_any_other_event_is_an_error(phase: Phase, event: Event) -> None:
    tee = Tee(1, ALWAYS)
    for before in INTO[phase]:
        tee.feed(before)
    assert tee.phase is phase
    with pytest.raises(TeeError, match=f"{type(event).__name__} while {phase.value}"):
        tee.feed(event)


@pytest.mark.parametrize(
    ("go_on", "received", "expected", "finished"),
    [
        (ALWAYS, 0, None, True),
        (ALWAYS, 1, 10**12, True),
        (NEVER, 10**6, 10**6, False),  # off: not even a finished download
        (GoOn(False, max_bytes=10, percent=1), 9, 10, False),
        # max_bytes: the whole size, when known, at its bound and one past
        (GoOn(max_bytes=1024), 0, 1024, True),
        (GoOn(max_bytes=1024), 0, 1025, False),
        (GoOn(max_bytes=1024), 1024, None, True),  # unknown: what has come so far
        (GoOn(max_bytes=1024), 1025, None, False),
        (GoOn(max_bytes=0), 0, 0, True),
        # percent: of a known length, at its bound and one byte short
        (GoOn(percent=50), 50, 100, True),
        (GoOn(percent=50), 49, 100, False),
        (GoOn(percent=100), 99, 100, False),
        (GoOn(percent=100), 100, 100, True),
        (GoOn(percent=0), 0, 100, True),
        (GoOn(percent=1), 10**6, None, False),  # unknown length: never far enough
        # either rule finishes it
        (GoOn(max_bytes=1024, percent=90), 0, 1024, True),
        (GoOn(max_bytes=1024, percent=90), 90, 100_000, False),
        (GoOn(max_bytes=1024, percent=90), 90_000, 100_000, True),
        (GoOn(max_bytes=1024, percent=90), 1025, None, False),
    ],
)
def test_go_on(go_on: GoOn, received: int, expected: int | None, finished: bool) -> None:
    assert go_on(received, expected) is finished


@pytest.mark.parametrize(
    ("finish", "max_kb", "percent", "go_on"),
    [
        (True, None, None, GoOn(True, None, None)),
        (True, 2, None, GoOn(True, 2048, None)),
        (True, 0, 30, GoOn(True, 0, 30)),
        (False, 2, 30, GoOn(False, 2048, 30)),
    ],
)
def test_go_on_from_config(finish: bool, max_kb: int | None, percent: int | None, go_on: GoOn):
    config = Config(finish_on_disconnect_max_kb=max_kb, finish_on_disconnect_percent=percent)
    assert GoOn.from_config(finish, config) == go_on
