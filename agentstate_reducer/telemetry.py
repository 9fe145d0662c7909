"""OpenTelemetry spans and metrics for what a reduction did, when ``opentelemetry-api`` is installed.

Optional and inert by default: nothing is imported until a reduction prunes something, and then
only when the ``opentelemetry`` package is importable (the ``otel`` extra). Without a tracer or
meter provider set by the application, the API's proxies are detected and nothing is recorded.

What is recorded (docs/observability.md):

* a span ``agentstate_reducer.reduce`` for every reduction that prunes, summarizes or repairs, a
  child of the current span (the framework's model-call span where it opens one around the
  integration's hook; docs/observability.md lists which do), with ``agentstate.*`` attributes:
  counts only, never a message's text;
* a child span ``agentstate_reducer.summarize`` around the summarizer, its outcome, and on failure
  the error's type (never its message, which may quote the conversation);
* a span ``agentstate_reducer.retention`` per retention or compaction pass (``retention_span``);
* metrics on the meter ``agentstate_reducer``: ``agentstate_reducer.reductions`` (counter, by entry
  and outcome), ``agentstate_reducer.messages.removed`` and ``agentstate_reducer.tokens.removed``
  (histograms per reduction), ``agentstate_reducer.summarizer.duration`` (seconds) and
  ``agentstate_reducer.retention.bytes_freed``.

Who runs a reduction names itself with ``entry(...)`` (a context variable: threads and asyncio tasks
each see their own): ``reduce`` by default, ``state``, ``saver``, ``middleware``, or a framework's
name; ``thread`` becomes ``agentstate.thread`` and ``gen_ai.conversation.id``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

__all__ = ["Reduction", "entry", "reduction_span", "retention_span", "summarizer_span"]

INSTRUMENTATION = "agentstate_reducer"
REDUCE_SPAN = "agentstate_reducer.reduce"
SUMMARIZE_SPAN = "agentstate_reducer.summarize"
RETENTION_SPAN = "agentstate_reducer.retention"


class _Entry(NamedTuple):
    name: str
    thread: str | None = None
    model: str | None = None


_ENTRY: contextvars.ContextVar[_Entry | None] = contextvars.ContextVar(
    "agentstate_reducer_entry", default=None
)


#: the ``_Entry`` of each (name, thread, model), made once: a saver enters one on every put
_entry_of: Final = functools.lru_cache(maxsize=1024)(_Entry)


def enter(name: str, *, thread: Any = None, model: Any = None) -> contextvars.Token[_Entry | None]:
    """Start what an ``entry`` block starts, without a context manager; pass what it returns to
    ``leave`` (in a ``finally``). For a caller on a hot path: no block object is made."""
    thread = None if thread is None else str(thread)
    return _ENTRY.set(_entry_of(name, thread, None if model is None else str(model)))


def leave(token: contextvars.Token[_Entry | None]) -> None:
    """End what ``enter`` started: the outer entry is current again."""
    _ENTRY.reset(token)


@contextlib.contextmanager
def entry(name: str, *, thread: Any = None, model: Any = None) -> Iterator[None]:
    """Reductions run inside this block are reported as run by ``name`` (for ``thread``, calling
    ``model``); an inner block wins, and leaving it restores the outer one."""
    token = enter(name, thread=thread, model=model)
    try:
        yield
    finally:
        leave(token)


def current_entry(namespace: Any = None) -> tuple[str, str | None]:
    """``(entry name, thread)`` of the innermost ``entry`` block; ``"reduce"`` outside one. Without a
    thread there, the thread of the hooks' ``namespace`` when it is ``("memories", thread)``."""
    found = _ENTRY.get()
    name, thread = ("reduce", None) if found is None else (found.name, found.thread)
    if (
        thread is None
        and isinstance(namespace, tuple)
        and len(namespace) == 2
        and namespace[0] == "memories"
        and namespace[1] is not None
    ):
        thread = str(namespace[1])
    return name, thread


_UNKNOWN: Final = object()


class _Otel:
    """The OpenTelemetry API's modules and this package's instruments, resolved once.

    The API sets a global provider once for good, so a tracer or meter found is kept. Until one
    is set, each reduction asks again, reading the API's global directly: ``get_tracer_provider()``
    looks the environment up at every call, which costs more than the rest of this module does.
    """

    def __init__(self, trace: Any, metrics: Any) -> None:
        self.trace = trace
        self.metrics = metrics
        self.status = importlib.import_module("opentelemetry.trace.status")
        self._metrics_globals = importlib.import_module("opentelemetry.metrics._internal")
        # once, so that providers named by OTEL_PYTHON_*_PROVIDER variables are loaded
        trace.get_tracer_provider()
        metrics.get_meter_provider()
        self._tracer: Any = None
        self._meter: Any = None
        self._instruments: dict[str, Any] = {}

    def tracer(self) -> Any | None:
        """The package's tracer, or None while no tracer provider is set."""
        if self._tracer is None:
            provider: Any = getattr(self.trace, "_TRACER_PROVIDER", _UNKNOWN)
            if provider is None:
                return None
            if provider is _UNKNOWN:  # an API without that global: its public call
                provider = self.trace.get_tracer_provider()
            if isinstance(provider, self.trace.ProxyTracerProvider):
                return None
            self._tracer = provider.get_tracer(INSTRUMENTATION)
        return self._tracer

    def meter(self) -> Any | None:
        """The package's meter, or None while no meter provider is set."""
        if self._meter is None:
            provider: Any = getattr(self._metrics_globals, "_METER_PROVIDER", _UNKNOWN)
            if provider is None:
                return None
            if provider is _UNKNOWN:
                provider = self.metrics.get_meter_provider()
            if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
                return None
            self._meter = provider.get_meter(INSTRUMENTATION)
        return self._meter

    def metering(self) -> bool:
        """A meter provider is set."""
        return self.meter() is not None

    def instrument(self, name: str) -> Any | None:
        """The counter or histogram ``name``, or None while no meter provider is set."""
        found = self._instruments.get(name)
        if found is None:
            meter = self.meter()
            if meter is None:
                return None
            kind, unit, text = _INSTRUMENTS[name]
            make = meter.create_counter if kind == "counter" else meter.create_histogram
            found = self._instruments.setdefault(name, make(name, unit=unit, description=text))
        return found


_INSTRUMENTS: Mapping[str, tuple[str, str, str]] = {
    "agentstate_reducer.reductions": (
        "counter", "{reduction}", "reductions that pruned, summarized or repaired"
    ),
    "agentstate_reducer.messages.removed": ("histogram", "{message}", "messages removed per reduction"),
    "agentstate_reducer.tokens.removed": (
        "histogram", "{token}", "tokens removed per reduction (token mode)"
    ),
    "agentstate_reducer.summarizer.duration": ("histogram", "s", "summarizer call duration"),
    "agentstate_reducer.retention.bytes_freed": ("histogram", "By", "bytes freed per retention pass"),
}

_resolved: list[_Otel | None] = []


def _otel() -> _Otel | None:
    """The API, imported on first use; None when ``opentelemetry`` is not installed."""
    if not _resolved:
        try:
            trace = importlib.import_module("opentelemetry.trace")
            metrics = importlib.import_module("opentelemetry.metrics")
            _resolved.append(_Otel(trace, metrics))
        except ImportError:
            _resolved.append(None)
    return _resolved[0]


@dataclass(slots=True)
class Reduction:
    """What one reduction did, filled in as it goes and recorded when its span ends."""

    mode: str = "count"
    messages_before: int = 0
    messages_after: int = 0
    tokens_before: int | None = None
    tokens_after: int | None = None
    pruned: int = 0
    repaired: bool = False
    summary_created: bool = False
    summary_covered: int = 0
    summary_error: bool = False

    @property
    def outcome(self) -> str:
        if self.summary_error:
            return "summary_error"
        if self.summary_created:
            return "summarized"
        return "repaired" if self.repaired else "pruned"


class _Nothing:
    """The context manager of a reduction nobody records: enters and exits, nothing else."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING: Final = _Nothing()


def reduction_span(report: Reduction, namespace: Any = None) -> contextlib.AbstractContextManager[None]:
    """A span around one reduction that changes something; ``report`` is read when it ends (its
    attributes and the metrics); ``namespace`` is the one its hooks get. Without the API, or with
    neither a tracer nor a meter provider set, a context manager that does nothing."""
    otel = _otel()
    if otel is None:
        return _NOTHING
    tracer = otel.tracer()
    if tracer is None and not otel.metering():
        return _NOTHING
    return _reduction_span(otel, tracer, report, namespace)


@contextlib.contextmanager
def _reduction_span(otel: _Otel, tracer: Any, report: Reduction, namespace: Any) -> Iterator[None]:
    if tracer is None:
        yield
        _record_metrics(otel, report)
        return
    name, thread = current_entry(namespace)
    with tracer.start_as_current_span(
        REDUCE_SPAN, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield
        except BaseException as exc:
            _error(otel, span, exc)
            raise
        finally:
            span.set_attributes(_attributes(report, name, thread))
    _record_metrics(otel, report)


def _error(otel: _Otel, span: Any, exc: BaseException) -> None:
    """Mark ``span`` failed with the error's type only: its message may quote the conversation."""
    kind = type(exc).__qualname__
    span.add_event("exception", {"exception.type": kind})
    span.set_attribute("error.type", kind)
    span.set_status(otel.status.Status(otel.status.StatusCode.ERROR, kind))


def _attributes(report: Reduction, name: str, thread: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "agentstate.entry": name,
        "agentstate.mode": report.mode,
        "agentstate.messages.before": report.messages_before,
        "agentstate.messages.after": report.messages_after,
        "agentstate.pruned": report.pruned,
        "agentstate.repaired": report.repaired,
        "agentstate.summary.created": report.summary_created,
        "agentstate.summary.covered": report.summary_covered,
    }
    if report.tokens_before is not None and report.tokens_after is not None:
        attributes["agentstate.tokens.before"] = report.tokens_before
        attributes["agentstate.tokens.after"] = report.tokens_after
    if thread is not None:
        attributes["agentstate.thread"] = thread
        attributes["gen_ai.conversation.id"] = thread
    found = _ENTRY.get()
    if found is not None and found.model is not None:
        attributes["gen_ai.request.model"] = found.model
    return attributes


def _record_metrics(otel: _Otel, report: Reduction) -> None:
    name, _ = current_entry()
    counter = otel.instrument("agentstate_reducer.reductions")
    if counter is None:
        return
    labels = {"agentstate.entry": name, "agentstate.outcome": report.outcome, "agentstate.mode": report.mode}
    counter.add(1, labels)
    removed = report.messages_before - report.messages_after
    _record(otel, "agentstate_reducer.messages.removed", removed, labels)
    if report.tokens_before is not None and report.tokens_after is not None:
        _record(otel, "agentstate_reducer.tokens.removed", report.tokens_before - report.tokens_after, labels)


def _record(otel: _Otel, name: str, value: float, labels: Mapping[str, str]) -> None:
    """Record ``value`` (at least 0) on the histogram ``name``, when a meter provider is set."""
    histogram = otel.instrument(name)
    if histogram is not None:
        histogram.record(max(value, 0), labels)


@contextlib.contextmanager
def summarizer_span(messages: int) -> Iterator[None]:
    """A child span around the summarizer's call over ``messages`` messages: its duration and
    outcome; on an error, its type (never its message) and the span's status. Re-raises."""
    otel = _otel()
    if otel is None:
        yield
        return
    tracer = otel.tracer()
    start = time.perf_counter()
    outcome = "ok"
    try:
        if tracer is None:
            yield
            return
        with tracer.start_as_current_span(SUMMARIZE_SPAN, record_exception=False,
                                          set_status_on_exception=False) as span:
            span.set_attribute("agentstate.summary.messages", messages)
            try:
                yield
            except BaseException as exc:
                outcome = "error"
                _error(otel, span, exc)
                raise
            finally:
                span.set_attribute("agentstate.summary.outcome", outcome)
    except BaseException:
        outcome = "error"
        raise
    finally:
        labels = {"agentstate.entry": current_entry()[0], "agentstate.outcome": outcome}
        _record(otel, "agentstate_reducer.summarizer.duration", time.perf_counter() - start, labels)


@contextlib.contextmanager
def retention_span(entry_name: str, *, thread: str | None = None) -> Iterator[dict[str, int]]:
    """A span around one retention or compaction pass (of ``thread``, when it is one thread's).
    The block fills the yielded dict with what the pass did (``checkpoints_deleted``,
    ``writes_deleted``, ``blobs_deleted``, ``bytes_freed``: ints), which become ``agentstate.*``
    attributes and the ``bytes_freed`` histogram."""
    stats: dict[str, int] = {}
    otel = _otel()
    if otel is None:
        yield stats
        return
    tracer = otel.tracer()
    if tracer is None:
        yield stats
    else:
        with tracer.start_as_current_span(
            RETENTION_SPAN, record_exception=False, set_status_on_exception=False
        ) as span:
            span.set_attribute("agentstate.entry", entry_name)
            if thread is not None:
                span.set_attributes({"agentstate.thread": thread, "gen_ai.conversation.id": thread})
            try:
                yield stats
            except BaseException as exc:
                _error(otel, span, exc)
                raise
            finally:
                span.set_attributes({f"agentstate.{k}": int(v) for k, v in stats.items()})
    if "bytes_freed" in stats:
        _record(otel, "agentstate_reducer.retention.bytes_freed", stats["bytes_freed"],
                {"agentstate.entry": entry_name})
