"""How the CLI fails: ``CliError`` is printed as one line (no traceback unless ``--debug``);
``require`` turns a missing optional dependency into the one line naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from .redact import redact_text

#: The program name, as the console script is installed and as every message names it.
PROG = "agentstate-reducer"


class CliError(Exception):
    """An error the CLI reports as one line (no traceback unless ``--debug``)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The text of an exception on one line (drivers such as psycopg answer on several), redacted
    by the active ``Redactor`` (see ``redact_text``) before it is shortened to ``limit``, so a
    secret cut in half by the shortening cannot slip through."""
    lines = (" ".join(line.split()) for line in str(exc).splitlines())
    text = redact_text("; ".join(line for line in lines if line)) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def install_hint(extra: str) -> str:
    """How to install ``extra``: from the agentstate-reducer checkout (the package index holds an
    unrelated project of the same name)."""
    return f'pip install ".[{extra}]"'


def missing_extra(feature: str, extra: str, module: str) -> CliError:
    """The one-line error for ``feature`` when ``module`` of ``extra`` cannot be imported."""
    return CliError(
        f"{feature} needs the {extra} extra (module {module!r} is missing): {install_hint(extra)}"
    )


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` or raise the one-line "needs the X extra" error."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(feature, extra, exc.name or module) from exc
