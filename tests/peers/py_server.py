"""Test peer: an MCP server built on the Python SDK (`mcp==2.3.0`, `MCPServer`).

Serves Streamable HTTP on http://127.0.0.1:PORT/mcp, both protocol eras on one
endpoint (2025-11-25 sessions and the stateless 2026-07-28 wire), or with
`--legacy` the sessions alone: a request stating 2026-07-28 (`server/discover`
first) is answered -32601, as a server that predates that revision does.

    py_server.py --port PORT [--json] [--stateless] [--legacy]

`--port 0` lets the OS pick the port. Once the socket is listening the server
prints `READY <port>` on stdout (flushed); everything else goes to stderr.
With AGENTD_PEER_WATCH_STDIN=1 the process exits as soon as its stdin reaches
EOF, so it dies with the test process that spawned it even if that one is
killed without running its destructors.

Tools: add(a, b), slow(steps), ask_name(), ask_name_rounds(), touch(),
echo_meta(query); resource demo://greeting. `echo_meta` answers the `agent/` keys
and `traceparent` of the request's `_meta` as a JSON object, so that a test reads
what was sent. `ask_name` elicits mid-call, which the 2026-07-28 wire cannot;
`ask_name_rounds` elicits through a resolver, mid-call at 2025-11-25 and as an
`input_required` result at 2026-07-28.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import warnings
from collections import defaultdict
from typing import Annotated, Any

import anyio
import uvicorn
from pydantic import BaseModel, Field

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from mcp.server.streamable_http import (
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamableHTTPServerTransport,
    StreamId,
)
from mcp.shared.exceptions import MCPDeprecationWarning

# ctx.info() (logging) is deprecated by the 2026-07-28 revision but still
# delivered on the 2025-11-25 wire, which is what the `slow` tool wants.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

NEW_ERA = "2026-07-28"
GREETING = "demo://greeting"


def _calling_session() -> str:
    """Session id of the transport that called into the event store.

    One store is shared by every session of the server and stream ids are
    JSON-RPC request ids ("1", "2", "_GET_stream"), which repeat across
    sessions. The store is only ever called from methods (or closures) of
    `StreamableHTTPServerTransport`, so the caller's frames hold `self`.
    Falls back to "" (one shared namespace) if that ever stops being true.
    """
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if isinstance(owner, StreamableHTTPServerTransport):
            return owner.mcp_session_id or ""
        frame = frame.f_back
    return ""


class MemEventStore(EventStore):
    """In-memory event store: ids are a global counter, replay is per stream."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        # event id -> (stream key, position in that stream)
        self._index: dict[EventId, tuple[tuple[str, StreamId], int]] = {}
        # stream key -> [(event id, message or None for priming events)]
        self._streams: dict[tuple[str, StreamId], list[tuple[EventId, Any]]] = defaultdict(list)

    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        key = (_calling_session(), stream_id)
        event_id = str(next(self._ids))
        events = self._streams[key]
        self._index[event_id] = (key, len(events))
        events.append((event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        found = self._index.get(last_event_id)
        if found is None:
            return None
        key, position = found
        if key[0] and key[0] != _calling_session():
            return None  # an event id of another session
        for event_id, message in self._streams[key][position + 1 :]:
            if message is not None:  # priming events carry no message
                await send_callback(EventMessage(message, event_id))
        return key[1]


class NameForm(BaseModel):
    """Form for the ask_name elicitation."""

    name: str = Field(description="Your name")


mcp = MCPServer("peer-py", version="0.1")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Take `steps` steps of ~50 ms, reporting progress after each one."""
    await ctx.info(f"slow: {steps} steps")
    for step in range(1, steps + 1):
        await anyio.sleep(0.05)
        await ctx.report_progress(step, steps, f"step {step}/{steps}")
    return f"done {steps}"


@mcp.tool()
async def ask_name(ctx: Context) -> str:
    """Ask the client for a name (elicitation); returns the outcome."""
    result = await ctx.elicit("What is your name?", NameForm)
    if result.action == "accept":
        return f"accept: name={result.data.name!r}"
    return result.action


def _name_form() -> Elicit[NameForm]:
    """The question `ask_name_rounds` resolves its answer with."""
    return Elicit("What is your name?", NameForm)


@mcp.tool()
async def ask_name_rounds(answer: Annotated[ElicitationResult[NameForm], Resolve(_name_form)]) -> str:
    """Ask the client for a name through a resolver; returns the outcome."""
    if isinstance(answer, AcceptedElicitation):
        return f"accept: name={answer.data.name!r}"
    return answer.action


@mcp.tool()
def echo_meta(query: str, ctx: Context, limit: int | None = None) -> str:
    """Answer the `agent/` keys and `traceparent` of the request's `_meta` as JSON."""
    meta = dict(ctx.request_context.meta or {})
    sent = {k: v for k, v in meta.items() if k.startswith("agent/") or k == "traceparent"}
    return json.dumps(sent, sort_keys=True)


@mcp.tool()
async def touch(ctx: Context) -> str:
    """Announce that demo://greeting changed and that the tool list changed."""
    # 2026-07-28: delivered to `subscriptions/listen` streams.
    await ctx.notify_resource_updated(GREETING)
    await ctx.notify_tools_changed()
    # 2025-11-25: plain notifications on the session (its GET stream).
    if (ctx.protocol_version or "") < NEW_ERA:
        await ctx.session.send_resource_updated(GREETING)
        await ctx.session.send_tool_list_changed()
    return "touched"


@mcp.resource(GREETING, name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed greeting."""
    return "hello"


class ReadyServer(uvicorn.Server):
    """uvicorn server that prints `READY <port>` once it is listening."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            port = self.servers[0].sockets[0].getsockname()[1]
            print(f"READY {port}", flush=True)


class LegacyOnly:
    """ASGI middleware: a POST stating a 2026-07-28 revision (its MCP-Protocol-Version
    header) is answered -32601, Method not found, as a server that predates the revision
    answers `server/discover`; everything else goes to `app`."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        version = headers.get(b"mcp-protocol-version", b"").decode("latin-1")
        if scope["type"] != "http" or scope["method"] != "POST" or version < NEW_ERA:
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            request_id = json.loads(body).get("id")
        except (ValueError, AttributeError):
            request_id = None
        answer = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": answer})


def watch_stdin() -> None:
    """Exit the whole process when stdin reaches EOF (the parent is gone)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="TCP port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--json", action="store_true", help="answer POSTs with application/json, not SSE")
    parser.add_argument("--stateless", action="store_true", help="no sessions (and no event store)")
    parser.add_argument("--legacy", action="store_true", help="refuse 2026-07-28: sessions alone")
    args = parser.parse_args()

    if os.environ.get("AGENTD_PEER_WATCH_STDIN") == "1":
        threading.Thread(target=watch_stdin, name="stdin-watch", daemon=True).start()

    app = mcp.streamable_http_app(
        json_response=args.json,
        stateless_http=args.stateless,
        event_store=MemEventStore(),
        retry_interval=1000,
        host="127.0.0.1",
    )
    served = LegacyOnly(app) if args.legacy else app
    config = uvicorn.Config(served, host="127.0.0.1", port=args.port, log_level="info", lifespan="on")
    ReadyServer(config).run()


if __name__ == "__main__":
    main()
