"""The checkpoint journal of one VPG: a pure model driven by an injected clock.

Automatic checkpoints are never stored. They sit on a grid (``phase + k * cadence``
plus a small deterministic jitter per ``k``) inside *segments* of time during which
the VPG was writing with a given cadence. Only tagged checkpoints are stored. A
checkpoint's identifier is its rank in the merged, time-ordered sequence, so ids are
monotonic in time and no checkpoint is ever materialised until a listing asks for it.
That keeps 10,000 untouched VPGs free and a touched one cheap.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Clock = Callable[[], float]

AUTOMATIC = 0
TAGGED = 1
VSS = 2  # never produced; listed so the numbering is written down once

_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def to_ms(t: float) -> float:
    """Round to the millisecond: the wire shows milliseconds, so the model keeps no more."""
    return round(t * 1000) / 1000


@dataclass(frozen=True)
class Checkpoint:
    """One journal checkpoint as the API shows it."""

    identifier: str
    timestamp: float
    tag: str | None
    type: int


@dataclass
class _Segment:
    """A stretch of time with one cadence; ``writing`` False means no checkpoints."""

    start: float
    end: float | None
    cadence: float
    phase: float
    writing: bool
    amplitude: float
    seed: int

    def boundary(self, k: int) -> float:
        """Time of grid point ``k``; the jitter is a hash of ``k`` so it is repeatable."""
        t = self.phase + k * self.cadence
        if self.amplitude:
            h = ((k ^ self.seed) * _MIX) & _MASK
            h ^= h >> 31
            t += ((h % 2001) / 1000.0 - 1.0) * self.amplitude
        return to_ms(t)

    def last_k_before(self, t: float) -> int:
        """Largest grid index whose boundary is strictly before ``t``."""
        k = math.floor((t - self.phase) / self.cadence)
        while self.boundary(k + 1) < t:
            k += 1
        while self.boundary(k) >= t:
            k -= 1
        return k

    def count_before(self, t: float) -> int:
        """How many checkpoints this segment wrote strictly before ``t``."""
        if not self.writing or t <= self.start:
            return 0
        stop = t if self.end is None else min(t, self.end)
        return max(0, self.last_k_before(stop) - self.last_k_before(self.start))

    def times(self, lo: float, hi: float) -> Iterator[float]:
        """Checkpoint times in ``[lo, hi]`` clipped to this segment."""
        if not self.writing:
            return
        lo = max(lo, self.start)
        end = hi if self.end is None else min(hi, self.end)
        k = self.last_k_before(lo) + 1
        while True:
            t = self.boundary(k)
            if t > end or (self.end is not None and t >= self.end):
                return
            yield t
            k += 1


@dataclass(frozen=True)
class JournalParams:
    """How a journal is shaped; ``seed`` fixes phase and jitter."""

    cadence_s: float
    history_s: float
    jitter_fraction: float = 0.03
    jitter_cap_s: float = 0.2
    seed: int = 0
    base_id: int = 1_000_000
    writing: bool = True


@dataclass
class Journal:
    """Checkpoints of one VPG, computed lazily from its segments and stored tags."""

    params: JournalParams
    clock: Clock
    segments: list[_Segment] = field(default_factory=list)
    tags: list[tuple[float, str]] = field(default_factory=list)

    @classmethod
    def start(
        cls, params: JournalParams, clock: Clock, *, stopped_for_s: float | None = None
    ) -> Journal:
        """A journal that looks as if it had been running for its whole history.

        ``stopped_for_s`` makes it look as if writing stopped that long ago (a paused
        VPG keeps the checkpoints it wrote before the pause).
        """
        journal = cls(params, clock)
        now = clock()
        origin = now - params.history_s - params.cadence_s
        journal.segments.append(journal._segment(origin, params.cadence_s, params.writing))
        if stopped_for_s is not None and params.writing:
            journal.current.end = now - stopped_for_s
            stopped = journal._segment(now - stopped_for_s, params.cadence_s, writing=False)
            journal.segments.append(stopped)
        return journal

    def _segment(self, start: float, cadence: float, writing: bool) -> _Segment:
        seed = (self.params.seed * 31 + len(self.segments)) & _MASK
        phase = start + (seed % 1000) / 1000.0 * cadence
        amplitude = min(self.params.jitter_fraction * cadence, self.params.jitter_cap_s)
        # Half a cadence is the most jitter that keeps the grid strictly ordered.
        amplitude = min(amplitude, cadence * 0.45)
        return _Segment(start, None, cadence, phase, writing, amplitude, seed)

    @property
    def current(self) -> _Segment:
        """The open segment."""
        return self.segments[-1]

    @property
    def cadence(self) -> float:
        """The cadence in force now."""
        return self.current.cadence

    @property
    def writing(self) -> bool:
        """Whether the journal is writing checkpoints now."""
        return self.current.writing

    def _switch(self, cadence: float, writing: bool) -> None:
        now = self.clock()
        self.current.end = now
        self.segments.append(self._segment(now, cadence, writing))

    def set_writing(self, writing: bool) -> None:
        """Start or stop writing; tags that have not landed yet are lost on a stop."""
        if writing == self.writing:
            return
        if not writing:
            now = self.clock()
            self.tags = [tag for tag in self.tags if tag[0] <= now]
        self._switch(self.cadence, writing)

    def set_cadence(self, cadence: float) -> None:
        """Change the cadence from now on."""
        if cadence <= 0:
            msg = f"cadence must be positive, got {cadence}"
            raise ValueError(msg)
        self._switch(cadence, self.writing)

    def next_boundary(self, after: float) -> float | None:
        """The first automatic checkpoint time after ``after`` (None when not writing)."""
        seg = self.current
        if not seg.writing:
            return None
        return seg.boundary(seg.last_k_before(max(after, seg.start)) + 1)

    def add_tag(self, name: str, lands_at: float) -> None:
        """Record a tagged checkpoint that becomes visible at ``lands_at``."""
        bisect.insort(self.tags, (to_ms(lands_at), name))

    def _count_before(self, t: float) -> int:
        autos = sum(seg.count_before(t) for seg in self.segments)
        return autos + bisect.bisect_left(self.tags, (t, ""))

    def _window(self) -> tuple[float, float]:
        now = self.clock()
        return now - self.params.history_s, now

    def list(self, start: float | None = None, end: float | None = None) -> list[Checkpoint]:
        """Checkpoints in the journal window and ``[start, end]``, oldest first."""
        lo, hi = self._window()
        lo = lo if start is None else max(lo, start)
        hi = hi if end is None else min(hi, end)
        if hi < lo:
            return []
        items: list[tuple[float, int, str | None]] = []
        for seg in self.segments:
            items.extend((t, AUTOMATIC, None) for t in seg.times(lo, hi))
        first = bisect.bisect_left(self.tags, (lo, ""))
        for lands_at, name in self.tags[first:]:
            if lands_at > hi:
                break
            items.append((lands_at, TAGGED, name))
        items.sort(key=lambda item: (item[0], item[1]))
        base = self.params.base_id + self._count_before(lo)
        return [Checkpoint(str(base + i), t, tag, kind) for i, (t, kind, tag) in enumerate(items)]

    def earliest(self) -> Checkpoint | None:
        """The oldest checkpoint still in the journal."""
        lo, hi = self._window()
        # Scan forward in growing steps so a long history is not listed whole.
        step = self.cadence * 4
        while lo <= hi:
            found = self.list(lo, min(hi, lo + step))
            if found:
                return found[0]
            lo += step
            step *= 4
        return None

    def latest(self) -> Checkpoint | None:
        """The newest checkpoint that has landed."""
        lo, hi = self._window()
        step = self.cadence * 4
        while hi >= lo:
            found = self.list(max(lo, hi - step), hi)
            if found:
                return found[-1]
            hi -= step
            step *= 4
        return None

    def find(self, identifier: str) -> Checkpoint | None:
        """A checkpoint still in the journal by its identifier."""
        return next((cp for cp in self.list() if cp.identifier == identifier), None)
