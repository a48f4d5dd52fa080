"""The fast front's head stream without sockets: playbooks of bytes and events fed in, and the
steps it answers (as mitmproxy's playbooks and h11's transition tables)."""

from __future__ import annotations

import pytest

from wwwproxy.proxy.replay import ToAiohttp
from wwwproxy.proxy.request_head import MAX_HEAD, HeadReader, HeadStream, ParsedHead, Step

HEAD = b"GET http://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n"
TOO_LONG = ToAiohttp.HEAD_TOO_LONG
OTHER = b"GET http://example.com/b HTTP/1.1\r\nHost: x\r\n\r\n"

# A playbook: (what comes, what the stream says).  What comes is bytes, "eof" (the browser's
# end of input) or "taken" (the head of the last HEAD answered); each step is checked after
# it, a HEAD with its head, a HAND_OFF with its reason.
PLAYBOOKS: dict[str, list[tuple[bytes | str, object]]] = {
    "nothing yet": [(b"", Step.WAIT)],
    "one head": [(HEAD, (Step.HEAD, HEAD)), ("taken", Step.WAIT)],
    "two pipelined, in order": [
        (HEAD + OTHER, (Step.HEAD, HEAD)),
        ("taken", (Step.HEAD, OTHER)),
        ("taken", Step.WAIT),
    ],
    "a head in two parts": [(HEAD[:20], Step.PARTIAL), (HEAD[20:], (Step.HEAD, HEAD))],
    "a head cut in its end": [(HEAD[:-2], Step.PARTIAL), (HEAD[-2:], (Step.HEAD, HEAD))],
    "a head and the start of the next": [
        (HEAD + OTHER[:5], (Step.HEAD, HEAD)),
        ("taken", Step.PARTIAL),
        (OTHER[5:], (Step.HEAD, OTHER)),
    ],
    "not a fast request: at once": [(b"POST ", (Step.HAND_OFF, ToAiohttp.NOT_PLAIN_GET))],
    "origin-form: at once": [(b"GET / HTTP", (Step.HAND_OFF, ToAiohttp.NOT_PLAIN_GET))],
    "bare line feeds": [
        (b"GET http://a/ HTTP/1.1\nHost: x\n\n", (Step.HAND_OFF, ToAiohttp.BARE_LINE_FEEDS))
    ],
    "too long": [
        (
            b"GET http://a/ HTTP/1.1\r\nX: " + b"p" * MAX_HEAD,
            (Step.HAND_OFF, ToAiohttp.HEAD_TOO_LONG),
        )
    ],
    "end of input when idle": [(b"", Step.WAIT), ("eof", Step.CLOSE)],
    "end of input in a head": [(HEAD[:10], Step.PARTIAL), ("eof", Step.CLOSE)],
    "end of input after a whole head": [
        (HEAD, (Step.HEAD, HEAD)),
        ("eof", (Step.HEAD, HEAD)),
        ("taken", Step.CLOSE),
    ],
}


def _step(stream: HeadStream) -> object:
    step = stream.next()
    if step is Step.HEAD:
        return step, stream.head
    if step is Step.HAND_OFF:
        return step, stream.why
    return step


@pytest.mark.parametrize("name", list(PLAYBOOKS))
def test_playbook(name: str) -> None:
    stream = HeadStream()
    for event, expected in PLAYBOOKS[name]:
        if event == "eof":
            stream.receive_eof()
        elif event == "taken":
            stream.taken()
        else:
            assert isinstance(event, bytes)
            stream.receive(event)
        assert _step(stream) == expected, (name, event)


def test_a_head_sent_byte_by_byte_is_found_once_whole() -> None:
    stream = HeadStream()
    for i, byte in enumerate(HEAD):
        stream.receive(bytes([byte]))
        expected = Step.HEAD if i == len(HEAD) - 1 else Step.PARTIAL
        assert stream.next() is expected, i
        assert stream.scanned <= max(0, i - 2)  # never searched from the start again
    assert stream.head == HEAD


@pytest.mark.parametrize(
    ("buffered", "late"),
    [(b"", None), (HEAD[:10], b"HTTP/1.1 408 Request Timeout\r\n")],
)
def test_a_late_head_is_answered_408_only_when_part_of_one_waits(
    buffered: bytes, late: bytes | None
) -> None:
    stream = HeadStream()
    stream.receive(buffered)
    answer = stream.late()
    assert (answer[:30] if answer else None) == late
    if answer:
        assert answer.endswith(b"Content-Length: 0\r\nConnection: close\r\n\r\n")


def test_the_sole_head_shortcut_and_drain() -> None:
    stream = HeadStream()
    assert stream.sole_head(HEAD)
    assert not stream.sole_head(HEAD + OTHER) and not stream.sole_head(HEAD[:-1])
    stream.receive(b"G")
    assert not stream.sole_head(HEAD)  # something before it
    assert stream.drain() == b"G" and not stream.buffer


# --- each head as read: what the fast answer needs, or why aiohttp reads it -------------------

KEEP_ALIVE = [
    # (request line's version and headers, kept alive after the answer: llhttp's rule)
    ("1.1", "", True),
    ("1.1", "Connection: close\r\n", False),
    ("1.1", "Connection: CLOSE\r\n", False),
    ("1.1", "Connection: keep-alive, close\r\n", False),
    ("1.1", "Connection: keep-alive\r\n", True),
    ("1.0", "", False),
    ("1.0", "Connection: keep-alive\r\n", True),
    ("1.0", "Connection: Keep-Alive\r\n", True),
    ("1.0", "Connection: close\r\n", False),
]


@pytest.mark.parametrize(("version", "lines", "keep_alive"), KEEP_ALIVE)
def test_keep_alive_is_the_requests_own(version: str, lines: str, keep_alive: bool) -> None:
    """Read while the parser's flags are this message's (after it they are reset), and the
    same for a connection's second head as for its first."""
    reader = HeadReader()
    for head in (HEAD, f"GET http://a/ HTTP/{version}\r\nHost: x\r\n{lines}\r\n".encode()):
        parsed = reader.read(head)
        assert isinstance(parsed, ParsedHead)
    assert (parsed.version, parsed.keep_alive) == (version, keep_alive)


READ_REASONS = [
    (b"HEAD http://a/ HTTP/1.1\r\n\r\n", ToAiohttp.NOT_PLAIN_GET),
    (b"GET http://a/ HTTP/1.1\r\nX: " + b"p" * MAX_HEAD + b"\r\n\r\n", ToAiohttp.HEAD_TOO_LONG),
    (b"GET http://a/ HTTP/1.1\r\nHo st: x\r\n\r\n", ToAiohttp.MALFORMED),
    (b"GET http://a/ HTTP/2.0\r\n\r\n", ToAiohttp.VERSION),
    (b"GET http://a/ HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", ToAiohttp.UPGRADE),
    (b"GET http://a/ HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n", ToAiohttp.UPGRADE),
    (b"GET http://a/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n", ToAiohttp.BODY),
    (b"GET http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", ToAiohttp.BODY),
    (b"GET http://a/ HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", ToAiohttp.EXPECT),
    (b"GET http://a/ HTTP/1.1\r\nProxy-Authorization: a\r\n\r\n", ToAiohttp.PROXY_AUTHORIZATION),
    (b"GET http://a/ HTTP/1.1\r\nVia: 1.1 wwwproxy\r\n\r\n", ToAiohttp.LOOP),
]


@pytest.mark.parametrize(("head", "why"), READ_REASONS, ids=[w.name for _, w in READ_REASONS])
def test_a_head_the_fast_path_does_not_take_says_why(head: bytes, why: ToAiohttp) -> None:
    assert HeadReader().read(head) is why
