"""A WebSocket server for the proxy tests: python `websockets` over TLS.

argv: the record file, certificate and key files. Prints its port once it
listens. Every handshake and every message it receives is one JSON line in
the record file: `open` (path with query, the extension offer, the
Authorization header, the subprotocol), `text` or `binary` (path, data;
binary as hex), `close` (path, the close code it received).

Under `/graphql` it speaks graphql-transport-ws: `connection_init` gets an
ack, `ping` a pong, `subscribe` one `next` (two for a subscription) and
`complete`; it executes nothing, it only records. Under `/stream/reflect`
a message `reflect` gets the Authorization header back: in a text
message, in a text message of three fragments, in a binary message, and
in the reason of its close (4000). It answers an upgrade
to `/v1/realtime/missing` with a plain 404. Elsewhere it echoes
every message back, text as `echo:TEXT`. It offers permessage-deflate
like any default server: an offer that reached it would be accepted.
"""
import asyncio, json, ssl, sys, threading

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

record_file, cert, key = sys.argv[1:4]
lock = threading.Lock()


def rec(**kw):
    with lock, open(record_file, "a") as f:
        f.write(json.dumps(kw) + "\n")


async def graphql(ws, msg):
    try:
        m = json.loads(msg)
    except (ValueError, TypeError):
        return
    kind = m.get("type") if isinstance(m, dict) else None
    if kind == "connection_init":
        await ws.send(json.dumps({"type": "connection_ack"}))
    elif kind == "ping":
        await ws.send(json.dumps({"type": "pong"}))
    elif kind == "subscribe":
        sid = m.get("id")
        query = (m.get("payload") or {}).get("query", "")
        if "messageAdded" in query:
            for i in range(2):
                await ws.send(json.dumps({"type": "next", "id": sid,
                                          "payload": {"data": {"messageAdded": f"m{i}"}}}))
        else:
            await ws.send(json.dumps({"type": "next", "id": sid,
                                      "payload": {"data": {"viewer": {"login": "octocat"}}}}))
        await ws.send(json.dumps({"type": "complete", "id": sid}))


async def handler(ws):
    path = ws.request.path
    rec(event="open", path=path,
        extensions=ws.request.headers.get("Sec-WebSocket-Extensions"),
        authorization=ws.request.headers.get("Authorization"),
        subprotocol=ws.subprotocol)
    try:
        async for msg in ws:
            if isinstance(msg, str):
                rec(event="text", path=path, data=msg)
            else:
                rec(event="binary", path=path, data=msg.hex())
            if path.startswith("/graphql"):
                await graphql(ws, msg)
            elif path.startswith("/stream/reflect") and msg == "reflect":
                auth = ws.request.headers.get("Authorization") or ""
                await ws.send("auth=" + auth)
                await ws.send(iter(["frag=", auth[:12], auth[12:]]))
                await ws.send(auth.encode())
                await ws.close(4000, "bye " + auth)
            elif isinstance(msg, str):
                await ws.send("echo:" + msg)
            else:
                await ws.send(msg)
    except ConnectionClosed:
        pass
    rec(event="close", path=path, code=ws.close_code)


def refuse_missing(ws, request):
    """`/v1/realtime/missing` does not exist: a plain 404, no upgrade."""
    if request.path == "/v1/realtime/missing":
        rec(event="refused", path=request.path)
        return ws.respond(404, "no such stream\n")
    return None


def subprotocol(ws, offered):
    return "graphql-transport-ws" if "graphql-transport-ws" in offered else None


async def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    async with serve(handler, "127.0.0.1", 0, ssl=ctx, select_subprotocol=subprotocol,
                     process_request=refuse_missing,
                     max_size=1 << 20) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.Future()


asyncio.run(main())
