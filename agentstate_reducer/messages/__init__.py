"""The one adapter that reads messages of every supported shape.

It never converts or mutates a message: it only *reads* role, id, content, tool-call ids and the
ids a tool result answers, and returns them as a small ``MessageInfo``. Everything else in the
package (planner, token counter, LangGraph merge) goes through here, so a new shape is supported
in one place.

* ``read``: one message at a time, the reference (``read_message``, ``tool_call_payloads``);
* ``fields``: the fields read from object messages, where they live, and their snapshots;
* ``jsontext``: JSON text of arguments and blocks, never raising;
* ``usage``: the input tokens a provider reported, from its usage object or a stored message.
"""

from __future__ import annotations

from agentstate_reducer.messages.fields import (
    PYDANTIC_EXTRA,
    READ_FIELDS,
    Uncacheable,
    fields_in_dict,
    snapshot,
    snapshots,
    unchanged,
)
from agentstate_reducer.messages.jsontext import JSON_WALK_LIMIT, arguments_text, json_text
from agentstate_reducer.messages.read import (
    LEADS_JOIN,
    LEADS_REQUIRED,
    PINNED_KINDS,
    ROLE_ALIASES,
    Kind,
    MessageInfo,
    is_message_like,
    read_message,
    read_usage,
    tool_call_payloads,
)
from agentstate_reducer.messages.usage import usage_input_tokens

__all__ = [
    "JSON_WALK_LIMIT",
    "LEADS_JOIN",
    "LEADS_REQUIRED",
    "PINNED_KINDS",
    "PYDANTIC_EXTRA",
    "READ_FIELDS",
    "ROLE_ALIASES",
    "Kind",
    "MessageInfo",
    "Uncacheable",
    "arguments_text",
    "fields_in_dict",
    "is_message_like",
    "json_text",
    "read_message",
    "read_usage",
    "snapshot",
    "snapshots",
    "tool_call_payloads",
    "unchanged",
    "usage_input_tokens",
]
