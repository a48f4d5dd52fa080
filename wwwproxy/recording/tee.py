"""The tee's decisions without its I/O: what of an upstream body goes to the browser and to the
recorder, what is held back, and when a record is finished or dropped.

:class:`Tee` is fed events (the head went out, a part of the body arrived, the browser took a
write or has gone, the body ended or failed, the record was written) and answers each with the
commands to carry out, in order (read on, record, send, finish or drop the record, end the
browser's answer).  At most the last command of an answer waits for a reply, the next event:
:class:`Read` (a :class:`Chunk`, :class:`BodyEnded` or :class:`UpstreamFailed`), :class:`Send`
(:class:`Wrote`) and :class:`Finish` (:class:`Recorded`).  An answer without one ends the tee.
:meth:`wwwproxy.recording.engine.Engine.fetch` does the reading and writing.

The rules:

- every part of the body is recorded, and sent to the browser as it arrives (a page that
  renders progressively, server-sent events);
- what completes the body in the browser's eyes is held back until the record is written: the
  last byte of a Content-Length body, else the end of the chunked body or the connection's
  close.  So whatever the browser has received in full is in the archive (switching offline
  right after a page has loaded finds it).  A Content-Length body of at most
  :data:`WHOLE_AT_ONCE` bytes that comes in one part is held back whole: head and body then go
  to the browser in one write, not two (a small page's last byte waits for the record anyway);
- a browser that leaves does not stop the recording if :class:`GoOn` says so
  (``finish_on_disconnect`` and its limits), asked again at each part that comes after;
  else the record is dropped, as it is when the body fails: a torn body is never recorded;
- a body cut off upstream is cut off for the browser too (``End(complete=False)``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..config import Config
from ..http.policy import finish_abandoned

__all__ = [
    "BodyEnded",
    "Chunk",
    "Client",
    "Command",
    "Drop",
    "End",
    "Event",
    "Finish",
    "GoOn",
    "Phase",
    "Read",
    "Record",
    "Recorded",
    "Send",
    "Started",
    "Tee",
    "TeeError",
    "UpstreamFailed",
    "WHOLE_AT_ONCE",
    "Wrote",
]


# --- events: what happened -------------------------------------------------------------------


class Client(enum.Enum):
    """The browser an answer is relayed to."""

    NONE = "none"  # a fetch without one (the crawler, the queue): nothing to leave
    OPEN = "open"  # takes what is sent
    GONE = "gone"  # has left: nothing more is sent to it


@dataclass(frozen=True)
class Started:
    """The head went to the browser (``Client.OPEN``), or it had gone already, or there is
    none."""

    client: Client


@dataclass(frozen=True)
class Chunk:
    """A part of the body arrived from upstream."""

    data: bytes


@dataclass(frozen=True)
class Wrote:
    """The reply to :class:`Send`: the browser took the bytes (False: it has gone)."""

    ok: bool


@dataclass(frozen=True)
class BodyEnded:
    """The body is over, all of it (its length reached, its last chunk, the close)."""


@dataclass(frozen=True)
class UpstreamFailed:
    """The body broke off (a time-out, a reset, a connection closed early)."""


@dataclass(frozen=True)
class Recorded:
    """The reply to :class:`Finish`: the record was written (False: the archive could not
    take it; the browser still gets its answer)."""

    ok: bool


Event = Started | Chunk | Wrote | BodyEnded | UpstreamFailed | Recorded


# --- commands: what to do --------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """Wait for the next part of the body."""


@dataclass(frozen=True)
class Record:
    """Hand these bytes to the recorder."""

    data: bytes


@dataclass(frozen=True)
class Send:
    """Write these bytes to the browser."""

    data: bytes


@dataclass(frozen=True)
class Finish:
    """The body is complete: write the record."""


@dataclass(frozen=True)
class Drop:
    """Throw the record away, unwritten: the browser left and finishing is not wanted (stop
    reading), or the body failed."""

    browser_left: bool


@dataclass(frozen=True)
class End:
    """End the browser's answer: complete, or cut off (it must see it cut off)."""

    complete: bool


Command = Read | Record | Send | Finish | Drop | End


# --- the decisions ---------------------------------------------------------------------------

#: a body up to this many bytes that comes in one part is sent in one write once recorded
WHOLE_AT_ONCE = 16 * 1024


@dataclass(frozen=True)
class GoOn:
    """Whether a download the browser has left is finished and recorded all the same:
    ``finish_on_disconnect``, within its limits (WWWOFFLE's intr-download-size and
    -percent: :func:`~wwwproxy.http.policy.finish_abandoned`)."""

    finish_on_disconnect: bool = True
    max_bytes: int | None = None
    percent: int | None = None

    @classmethod
    def from_config(cls, finish_on_disconnect: bool, config: Config) -> GoOn:
        max_kb = config.finish_on_disconnect_max_kb
        return cls(
            finish_on_disconnect,
            max_kb * 1024 if max_kb is not None else None,
            config.finish_on_disconnect_percent,
        )

    def __call__(self, received: int, expected: int | None) -> bool:
        return self.finish_on_disconnect and finish_abandoned(
            received, expected, max_bytes=self.max_bytes, percent=self.percent
        )


class Phase(enum.Enum):
    """Where the tee is: which event it waits for (:data:`ACCEPTS`)."""

    START = "start"  # for the head to go out
    READING = "reading"  # for a part of the body (after Read)
    WRITING = "writing"  # for the browser to take a part (after Send)
    FINISHING = "finishing"  # for the record to be written (after Finish)
    FLUSHING = "flushing"  # for the browser to take the held-back end (after Send)
    DONE = "done"


#: the events each phase takes, and the method of :class:`Tee` that answers each; any other
#: event is a :class:`TeeError`.  The body can fail while a part of it goes to the browser.
ACCEPTS: dict[Phase, dict[type, str]] = {
    Phase.START: {Started: "_started"},
    Phase.READING: {Chunk: "_chunk", BodyEnded: "_body_ended", UpstreamFailed: "_failed"},
    Phase.WRITING: {Wrote: "_wrote", UpstreamFailed: "_failed"},
    Phase.FINISHING: {Recorded: "_recorded"},
    Phase.FLUSHING: {Wrote: "_flushed"},
    Phase.DONE: {},
}


class TeeError(RuntimeError):
    """An event the tee was not waiting for (a bug in the I/O that feeds it)."""


class Tee:
    """One body's way to the browser and the recorder (the module's docstring has the rules).
    ``expected``: the Content-Length (None: chunked or ended by the close); ``go_on``: for a
    browser that leaves; ``keep``: a body up to this many bytes is kept (:attr:`body`)."""

    def __init__(self, expected: int | None, go_on: GoOn, *, keep: int = 0) -> None:
        self.expected = expected
        self.go_on = go_on
        self.phase = Phase.START
        self.client = Client.NONE
        #: bytes of body received from upstream
        self.received = 0
        #: the whole body came
        self.complete = False
        #: the record was written
        self.recorded = False
        #: what completes the body for the browser, sent once the record is written
        self.held = b""
        self._kept: list[bytes] | None = [] if keep and (expected or 0) <= keep else None
        self._keep = keep

    @property
    def receiving(self) -> bool:
        """Is the body still coming (a failure now is the body's)?"""
        return self.phase in (Phase.READING, Phase.WRITING)

    @property
    def body(self) -> bytes | None:
        """The whole body, if it came and is no longer than ``keep``."""
        return b"".join(self._kept) if self._kept is not None and self.complete else None

    def feed(self, event: Event) -> list[Command]:
        """Take ``event``; the commands to carry out, in order."""
        method = ACCEPTS[self.phase].get(type(event))
        if method is None:
            raise TeeError(f"{type(event).__name__} while {self.phase.value}")
        commands: list[Command] = getattr(self, method)(event)
        return commands

    # --- the answers, one per (phase, event) of ACCEPTS ----------------------------------------

    def _started(self, event: Started) -> list[Command]:
        self.client = event.client
        self.phase = Phase.READING
        return [Read()]

    def _chunk(self, event: Chunk) -> list[Command]:
        data = event.data
        self.received += len(data)
        if self._kept is not None:
            self._kept.append(data)
            if self.received > self._keep:
                self._kept = None
        commands: list[Command] = [Record(data)]
        send = data
        if self.expected is not None and self.received >= self.expected:
            whole = self.received == len(data) and self.received <= WHOLE_AT_ONCE
            cut = 0 if whole else len(data) - 1
            send, self.held = data[:cut], self.held + data[cut:]
        if self.client is Client.OPEN and send:
            self.phase = Phase.WRITING
            return [*commands, Send(send)]
        return commands + self._read_on()

    def _wrote(self, event: Wrote) -> list[Command]:
        if not event.ok:
            self.client = Client.GONE
        return self._read_on()

    def _read_on(self) -> list[Command]:
        """After a part: the next, unless the browser has gone and finishing is not wanted."""
        if self.client is Client.GONE and not self.go_on(self.received, self.expected):
            self.phase = Phase.DONE
            return [Drop(browser_left=True)]
        self.phase = Phase.READING
        return [Read()]

    def _body_ended(self, event: BodyEnded) -> list[Command]:
        self.complete = True
        self.phase = Phase.FINISHING
        return [Finish()]

    def _failed(self, event: UpstreamFailed) -> list[Command]:
        return [Drop(browser_left=False), *self._close()]

    def _recorded(self, event: Recorded) -> list[Command]:
        self.recorded = event.ok
        return self._close()

    def _close(self) -> list[Command]:
        """The record is written or dropped: the held-back end goes out, then the end."""
        if self.client is Client.OPEN and self.held:
            self.phase = Phase.FLUSHING
            return [Send(self.held)]
        return self._end()

    def _flushed(self, event: Wrote) -> list[Command]:
        if not event.ok:
            self.client = Client.GONE
        return self._end()

    def _end(self) -> list[Command]:
        self.phase = Phase.DONE
        return [End(self.complete)] if self.client is Client.OPEN else []
