"""tiktoken, loaded once per process and encoding, off the calling thread, with a timeout.

Without tiktoken installed the heuristic counts: that is the documented default, logged at DEBUG
level, never warned. With tiktoken installed, the encoding file is downloaded on first use; where
that fails (a firewall, no network, an unknown name) the load emits one short ``RuntimeWarning``
line per process and encoding (the underlying error's full text goes to the DEBUG log) and the
heuristic counts instead. The load is tried once per process and encoding and given up after
``load_timeout`` seconds (default ``agentstate_reducer.tokens.TIKTOKEN_LOAD_TIMEOUT``, read at call
time), so a request never hangs on it and never retries it. docs/tokens.md says how to count
exactly offline.

This module is named after the library it loads; it imports it with an absolute ``import
tiktoken``, which finds the installed distribution, never this module.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from typing import Any, Final

from agentstate_reducer.tokens.cache import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_CACHE_SIZE,
    TokenCounter,
    TokenCounterFn,
    heuristic_counter,
)
from agentstate_reducer.tokens.rules import IMAGE_TOKENS

DEFAULT_ENCODING: Final = "cl100k_base"
#: Seconds the first load of an encoding waits by default; read at call time. Set it through
#: ``agentstate_reducer.tokens.TIKTOKEN_LOAD_TIMEOUT`` (the package forwards it here).
TIKTOKEN_LOAD_TIMEOUT: float = 10.0
logger = logging.getLogger("agentstate_reducer.tokens")


class _Load:
    """One attempt to load an encoding, shared by every caller in the process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = threading.Event()
        self.encoding: Any = None
        self.error: BaseException | None = None
        self.settled = False  # True once a caller has taken the outcome (final for the process)
        self.result: Any = None

    def run(self) -> None:
        try:
            import tiktoken

            self.encoding = tiktoken.get_encoding(self.name)
        except BaseException as exc:  # ImportError, network and hash errors, unknown names
            self.error = exc
        finally:
            self.done.set()


_loads: dict[str, _Load] = {}
_loads_lock = threading.Lock()


def load_encoding(name: str, timeout: float | None = None) -> Any:
    """The tiktoken ``Encoding`` called ``name``, or None when it cannot be had (warned once,
    unless tiktoken is not installed: see the module docstring).

    The first call per process and name starts the load on a daemon thread and waits at most
    ``timeout`` seconds (default ``TIKTOKEN_LOAD_TIMEOUT``); its outcome is final for the process:
    a failure or a timeout is never retried. Never raises.
    """
    wait = TIKTOKEN_LOAD_TIMEOUT if timeout is None else timeout
    with _loads_lock:
        load = _loads.get(name)
        if load is None:
            load = _loads[name] = _Load(name)
            threading.Thread(target=load.run, name=f"tiktoken-load-{name}", daemon=True).start()
        elif load.settled:
            return load.result  # final: a load that failed or timed out is neither awaited nor retried
    load.done.wait(wait)
    with _loads_lock:
        if load.settled:
            return load.result
        load.settled = True
        if load.done.is_set() and load.encoding is not None:
            load.result = load.encoding
            return load.result
    _warn_fallback(name, load.error, wait)
    return None


def _tiktoken_missing(error: BaseException | None) -> bool:
    """True when the load failed because tiktoken itself is not installed (not one of its
    dependencies, which is a broken install worth a warning)."""
    return isinstance(error, ImportError) and (error.name or "").partition(".")[0] == "tiktoken"


def _fallback_reason(error: BaseException | None, waited: float) -> tuple[str, str]:
    """A few words on why the load failed, and what to do: for a one-line warning."""
    offline = "Set TIKTOKEN_CACHE_DIR or pass encoding=/token_counter="
    if error is None:
        return f"no answer within {waited:g} s; no network?", offline
    if isinstance(error, OSError):  # requests' errors, DNS, refused connections, a proxy's refusal
        return f"download failed: {type(error).__name__}; no network?", offline
    if isinstance(error, ValueError) and str(error).startswith("Unknown encoding"):
        return (
            "tiktoken knows no encoding of that name",
            "Pass a name such as 'o200k_base', or encoding=/token_counter=",
        )
    first_line = (str(error).strip().splitlines() or [""])[0]
    shown = first_line if len(first_line) <= 80 else first_line[:77] + "..."
    return f"{type(error).__name__}: {shown}" if shown else type(error).__name__, offline


def _warn_fallback(name: str, error: BaseException | None, waited: float) -> None:
    """Tell the user once that tiktoken could not count: nothing when tiktoken is not installed
    (the heuristic is then the documented behaviour, logged at DEBUG level), else one line."""
    if _tiktoken_missing(error):
        logger.debug(
            "tiktoken is not installed: counting tokens with the chars/4 heuristic (encoding %r)", name
        )
        return
    if error is not None:
        logger.debug("tiktoken could not load encoding %r", name, exc_info=error)
    reason, hint = _fallback_reason(error, waited)
    message = (
        f"agentstate_reducer: tiktoken could not load encoding {name!r} ({reason}); "
        f"counting with the chars/4 heuristic. {hint}"
    )
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=_caller_stacklevel())
    except Exception:  # warnings turned into errors (-W error) must not break a reduction
        logger.warning("%s", message)


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside this package."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("agentstate_reducer"):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def tiktoken_counter(
    encoding: Any,
    *,
    cache_size: int = DEFAULT_CACHE_SIZE,
    image_tokens: int = IMAGE_TOKENS,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TokenCounter:
    """An exact counter for a ready ``tiktoken.Encoding`` (or anything with ``encode_ordinary``)."""
    encode = getattr(encoding, "encode_ordinary", None)
    if not callable(encode):
        raise TypeError(
            f"encoding must be a tiktoken encoding name or a tiktoken.Encoding, got {type(encoding).__name__}"
        )

    def measure(text: str) -> int:
        # encode_ordinary: special-token text such as "<|endoftext|>" is counted as text, never refused
        return len(encode(text))

    label = getattr(encoding, "name", type(encoding).__name__)
    return TokenCounter(
        measure,
        name=f"tiktoken:{label}",
        cache_size=cache_size,
        image_tokens=image_tokens,
        cache_bytes=cache_bytes,
    )


def resolve_token_counter(
    token_counter: TokenCounterFn | None = None,
    *,
    encoding: Any = DEFAULT_ENCODING,
    cache_size: int = DEFAULT_CACHE_SIZE,
    load_timeout: float | None = None,
    image_tokens: int = IMAGE_TOKENS,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> TokenCounterFn:
    """Resolve the counter: ``token_counter`` as is; else tiktoken ``encoding`` (a name such as
    ``"cl100k_base"`` or ``"o200k_base"``, or a ready ``tiktoken.Encoding``) when tiktoken is
    installed and the encoding loads within ``load_timeout`` seconds; else the heuristic.

    Never raises for a missing tiktoken, an unknown name or an unreachable download: it falls
    back, silently (a DEBUG log) when tiktoken is not installed, else with one warning line per
    process and encoding. The built-in counters cache per-message counts
    (at most ``cache_size`` messages and ``cache_bytes`` bytes, see ``TokenCounter``).
    """
    if token_counter is not None:
        if not callable(token_counter):
            raise TypeError(
                f"token_counter must be a callable message -> int, got {type(token_counter).__name__}"
            )
        return token_counter
    if isinstance(encoding, str):
        enc = load_encoding(encoding, load_timeout)
        if enc is None:
            return heuristic_counter(
                cache_size=cache_size, image_tokens=image_tokens, cache_bytes=cache_bytes
            )
        return tiktoken_counter(
            enc, cache_size=cache_size, image_tokens=image_tokens, cache_bytes=cache_bytes
        )
    return tiktoken_counter(
        encoding, cache_size=cache_size, image_tokens=image_tokens, cache_bytes=cache_bytes
    )
