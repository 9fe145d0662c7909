"""Plain-text output for the CLI: tables, a progress bar, a terminal chart; no dependencies.

``write_chart`` is the one function here that needs something (matplotlib, the ``plot`` extra),
imported when it is called.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def human_duration(delta: timedelta) -> str:
    """``delta`` in words, largest unit first: "30 days", "1 day 12 hours", "90 seconds" stays
    "1 minute 30 seconds"; whole seconds (a fraction is dropped, a zero delta is "0 seconds")."""
    left = int(delta.total_seconds())
    parts = []
    for word, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(plural(count, word))
    return " ".join(parts) or "0 seconds"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, right: Sequence[bool] | None = None
) -> str:
    """A left/right aligned text table; cells are str()-ed, None shows as "-"."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    align = right if right is not None else [i > 0 for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if a else v.ljust(w) for v, w, a in zip(values, widths, align, strict=True)
        )

    out = [line(list(headers)), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(s.rstrip() for s in out)


class Progress:
    """Progress on stderr: on a terminal, a one-line bar redrawn at most ten times a second; else
    (captured or redirected output) one plain line every ``every`` seconds, so a long run is
    never silent and a log gets no carriage-return noise. A run shorter than ``every`` prints no
    line at all. ``clock`` (seconds, monotonic) is what elapsed time is read from."""

    def __init__(
        self,
        total: int,
        label: str,
        *,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        every: float = 5.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = (
            enabled if enabled is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        )
        self.every = every
        self.done = 0
        self.clock = clock
        self._start = clock()
        self._last_draw = 0.0
        self._last_line = self._start
        self.silenced = False  # the stream's reader went away (``_write``)

    def update(self, n: int = 1, *, note: str = "") -> None:
        self.done += n
        now = self.clock()
        if self.enabled:
            if now - self._last_draw >= 0.1 or self.done >= self.total:
                self._last_draw = now
                self._draw(note)
        elif now - self._last_line >= self.every and self.done < self.total:
            self._last_line = now
            self._write(
                f"{self.label.strip()}: {self.done}/{self.total} after {now - self._start:.0f} s"
                f"{' ' + note if note else ''}\n"
            )

    def _write(self, text: str) -> None:
        """Progress is for a person watching: when nobody reads the stream any more, the work
        goes on and progress stops (the command's report says what happened)."""
        if self.silenced:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except BrokenPipeError:
            self.silenced = True

    def _draw(self, note: str) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(width * frac)
        bar = "#" * filled + "." * (width - filled)
        elapsed = self.clock() - self._start
        self._write(f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {note}".rstrip() + " ")

    def close(self) -> None:
        if self.enabled:
            self._draw("")
            self._write("\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sample(values: Sequence[int | None], width: int) -> list[int | None]:
    """``width`` points of ``values``: the value at the last turn of each column's span."""
    n = len(values)
    if n <= width:
        return list(values)
    return [values[min(n - 1, ((i + 1) * n) // width - 1)] for i in range(width)]


def ascii_chart(
    series: Sequence[tuple[str, str, Sequence[int | None]]],
    *,
    width: int = 60,
    height: int = 12,
    title: str = "",
) -> str:
    """A text chart of stored bytes per turn: one glyph per series, ``@`` where they overlap (the
    legend then says so). Each y label sits on the row its value is drawn on.

    ``series`` holds ``(name, glyph, values)``, one value per turn (None: not measured)."""
    longest = max((len(v) for _, _, v in series), default=0)
    if longest == 0:
        return f"{title}\n(no data)" if title else "(no data)"
    cols = min(width, longest)
    top = max((v for _, _, vals in series for v in vals if v is not None), default=0) or 1
    grid = [[" "] * cols for _ in range(height)]

    def row_of(value: int) -> int:
        return height - 1 - min(height - 1, round(value / top * (height - 1)))

    overlap = False
    for _, glyph, values in series:
        for x, v in enumerate(_sample(values, cols)):
            if v is None:
                continue
            row = grid[row_of(v)]
            overlap = overlap or row[x] not in (" ", glyph)
            row[x] = glyph if row[x] in (" ", glyph) else "@"
    labels = {row_of(0): "0 B", row_of(top // 2): human_bytes(top // 2), row_of(top): human_bytes(top)}
    pad = max(len(s) for s in labels.values())
    lines = [title] if title else []
    for i, row in enumerate(grid):
        lines.append(f"{labels.get(i, ''):>{pad}} |{''.join(row)}".rstrip())
    lines.append(" " * pad + " +" + "-" * cols)
    left, right_label = "turn 1", f"turn {longest}"
    lines.append(" " * (pad + 2) + left + right_label.rjust(max(cols - len(left), len(right_label) + 1)))
    legend = [f"{glyph} {name}" for name, glyph, _ in series] + (["@ both"] if overlap else [])
    lines.append(" " * (pad + 2) + "   ".join(legend))
    return "\n".join(lines)


#: The chart formats ``write_chart`` writes, by file extension (matplotlib's savefig formats).
CHART_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def chart_format(path: str) -> str:
    """The format ``path``'s extension names; ``ValueError`` saying which are known otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in CHART_FORMATS:
        *first, last = CHART_FORMATS
        known = f"{', '.join(first)} or {last}"
        named = f"extension {suffix!r}" if suffix else "no extension"
        raise ValueError(f"{path!r} has {named}: the chart is written as {known} (by the extension)")
    return CHART_FORMATS[suffix]


def write_chart(
    path: str,
    series: Sequence[tuple[str, Sequence[int | None]]],
    *,
    title: str,
) -> None:
    """The terminal chart as an image in the format ``path``'s extension names (``chart_format``):
    PNG, SVG or PDF, with ``title`` also in the file's metadata. matplotlib's own canvases: no
    pyplot, no display needed."""
    from matplotlib.figure import Figure

    fmt = chart_format(path)
    fig = Figure(figsize=(8, 4.5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    for name, values in series:
        points = [(i + 1, v / 1e6) for i, v in enumerate(values) if v is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], label=name, linewidth=2)
    ax.set_xlabel("turn")
    ax.set_ylabel("stored bytes of the thread (MB)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format=fmt, metadata={"Title": " ".join(title.split())})
