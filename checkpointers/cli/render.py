"""Plain-text output for the CLI: tables, a progress bar, a terminal chart; no dependencies.

``write_png_chart`` is the one function here that needs something (matplotlib, the ``plot``
extra), imported when it is called.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
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
    """A one-line progress bar on stderr, redrawn at most ten times a second.

    Drawn only on a terminal: captured or redirected output gets no carriage-return noise."""

    def __init__(
        self, total: int, label: str, *, stream: TextIO | None = None, enabled: bool | None = None
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = (
            enabled if enabled is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        )
        self.done = 0
        self._start = time.perf_counter()
        self._last_draw = 0.0

    def update(self, n: int = 1, *, note: str = "") -> None:
        self.done += n
        now = time.perf_counter()
        if self.enabled and (now - self._last_draw >= 0.1 or self.done >= self.total):
            self._last_draw = now
            self._draw(note)

    def _draw(self, note: str) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(width * frac)
        bar = "#" * filled + "." * (width - filled)
        elapsed = time.perf_counter() - self._start
        self.stream.write(
            f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s {note}".rstrip() + " "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw("")
            self.stream.write("\n")
            self.stream.flush()

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
    """A text chart of stored bytes per turn: one glyph per series, ``@`` where they overlap.

    ``series`` holds ``(name, glyph, values)``, one value per turn (None: not measured)."""
    longest = max((len(v) for _, _, v in series), default=0)
    if longest == 0:
        return f"{title}\n(no data)" if title else "(no data)"
    cols = min(width, longest)
    top = max((v for _, _, vals in series for v in vals if v is not None), default=0) or 1
    grid = [[" "] * cols for _ in range(height)]
    for _, glyph, values in series:
        for x, v in enumerate(_sample(values, cols)):
            if v is None:
                continue
            y = min(height - 1, round(v / top * (height - 1)))
            row = grid[height - 1 - y]
            row[x] = glyph if row[x] in (" ", glyph) else "@"
    labels = {0: human_bytes(top), height // 2: human_bytes(top // 2), height - 1: "0 B"}
    pad = max(len(s) for s in labels.values())
    lines = [title] if title else []
    for i, row in enumerate(grid):
        lines.append(f"{labels.get(i, ''):>{pad}} |{''.join(row)}".rstrip())
    lines.append(" " * pad + " +" + "-" * cols)
    left, right_label = "turn 1", f"turn {longest}"
    lines.append(" " * (pad + 2) + left + right_label.rjust(max(cols - len(left), len(right_label) + 1)))
    lines.append(" " * (pad + 2) + "   ".join(f"{glyph} {name}" for name, glyph, _ in series))
    return "\n".join(lines)


def write_png_chart(
    path: str,
    series: Sequence[tuple[str, Sequence[int | None]]],
    *,
    title: str,
) -> None:
    """The terminal chart as a PNG (matplotlib's Agg canvas: no pyplot, no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
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
    fig.savefig(path, format="png")
