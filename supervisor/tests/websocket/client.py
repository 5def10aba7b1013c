"""WebSocket clients inside the sandbox: python `websockets` (its asyncio
client: the threaded one can time out its own reads while closing), gql's
GraphQL-over-WebSocket transport, and a raw TLS socket for what no
well-behaved client sends.

argv: the server's port, the message limit of `rt.test`, and which steps
to run (`clients`, `raw`, or `reload` with the working directory). One JSON line per step: its name, the HTTP status
of the upgrade, the messages received (text, or binary as hex), pongs, the
close code the client got, or the error.
"""
import asyncio, base64, json, os, socket, ssl, struct, sys, time

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.asyncio.client import connect
from websockets.sync.client import connect as connect_sync

PORT = int(sys.argv[1])
LIMIT = int(sys.argv[2])
GROUP = sys.argv[3]


def out(**kw):
    print(json.dumps(kw), flush=True)


def client_step(name, host, path, sends, **options):
    """A real client (websockets' asyncio one): sends each message, reads
    one answer after each, then closes."""
    got = []

    async def run():
        async with connect(f"wss://{host}:{PORT}{path}", open_timeout=20,
                           ssl=ssl.create_default_context(), **options) as ws:
            for m in sends:
                await ws.send(m)
                r = await asyncio.wait_for(ws.recv(), 20)
                got.append(r if isinstance(r, str) else r.hex())
        return ws.close_code

    try:
        close = asyncio.run(run())
        out(step=name, status=101, received=got, close=close)
    except InvalidStatus as e:
        out(step=name, status=e.response.status_code,
            policy=e.response.headers.get("x-openshell-policy"), received=got)
    except ConnectionClosed as e:
        out(step=name, status=101, received=got,
            close=e.rcvd.code if e.rcvd else None,
            reason=e.rcvd.reason if e.rcvd else None)
    except Exception as e:
        out(step=name, error=repr(e), received=got)


def reflect_step(name, host, path):
    """Sends `reflect`, then reads until the server closes: the messages
    (binary as hex) and the close's code and reason."""
    got = []

    async def run():
        async with connect(f"wss://{host}:{PORT}{path}", open_timeout=20,
                           ssl=ssl.create_default_context()) as ws:
            await ws.send("reflect")
            try:
                while True:
                    r = await asyncio.wait_for(ws.recv(), 20)
                    got.append(r if isinstance(r, str) else r.hex())
            except ConnectionClosed as e:
                return e.rcvd.code if e.rcvd else None, e.rcvd.reason if e.rcvd else None

    try:
        close, reason = asyncio.run(run())
        out(step=name, status=101, received=got, close=close, reason=reason)
    except InvalidStatus as e:
        out(step=name, status=e.response.status_code,
            policy=e.response.headers.get("x-openshell-policy"), received=got)
    except Exception as e:
        out(step=name, error=repr(e), received=got)


def gql_step(name, query, subscribe=False):
    from gql import Client, gql
    from gql.transport.websockets import WebsocketsTransport

    async def run():
        t = WebsocketsTransport(
            url=f"wss://gql.test:{PORT}/graphql?step={name}",
            subprotocols=["graphql-transport-ws"],
            ssl=ssl.create_default_context(), connect_timeout=20, close_timeout=5,
            ack_timeout=20)
        async with Client(transport=t, execute_timeout=20) as s:
            if subscribe:
                return [r async for r in s.subscribe(gql(query))]
            return await s.execute(gql(query))

    try:
        out(step=name, ok=True, result=asyncio.run(run()))
    except Exception as e:
        close = None
        cause = e
        while cause is not None:
            if isinstance(cause, ConnectionClosed) and cause.rcvd:
                close = cause.rcvd.code
            cause = cause.__cause__ or cause.__context__
        out(step=name, ok=False, error=repr(e), close=close)


def frame(op, payload, fin=True, mask=True, rsv=0):
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    if n < 126:
        head = bytes([b0, (0x80 if mask else 0) | n])
    elif n < 65536:
        head = bytes([b0, (0x80 if mask else 0) | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, (0x80 if mask else 0) | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def raw_step(name, host, path, frames, pipelined=False, headers="", extra="", replies=0):
    """A raw client: the handshake, then `frames` as given; reads frames
    until a close or the end of the connection, and after `replies` data
    messages closes itself."""
    ctx = ssl.create_default_context()
    s = ctx.wrap_socket(socket.create_connection((host, PORT), timeout=10),
                        server_hostname=host)
    key = base64.b64encode(os.urandom(16)).decode()
    if headers is None:
        head = extra
    else:
        head = ("Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n" + headers)
    req = f"GET {path} HTTP/1.1\r\nHost: {host}:{PORT}\r\n{head}\r\n".encode()
    s.sendall(req + frames if pipelined else req)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else None
    policy = next((l.split(":", 1)[1].strip() for l in lines
                   if l.lower().startswith("x-openshell-policy:")), None)
    result = dict(step=name, status=status, policy=policy, received=[], pongs=0, close=None)
    if status != 101:
        out(**result)
        return
    if not pipelined:
        s.sendall(frames)

    class Reader:
        def __init__(self, pre):
            self.pre = pre

        def take(self, n):
            got, self.pre = self.pre[:n], self.pre[n:]
            return got + (read_exact(s, n - len(got)) if len(got) < n else b"")

    r = Reader(rest)
    try:
        while True:
            b0, b1 = r.take(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", r.take(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", r.take(8))[0]
            payload = r.take(n)
            op = b0 & 0x0F
            if op == 0x8:
                result["close"] = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                result["reason"] = payload[2:].decode(errors="replace")
                break
            if op == 0xA:
                result["pongs"] += 1
            elif op in (0x1, 0x2):
                result["received"].append(payload.decode() if op == 0x1 else payload.hex())
                if len(result["received"]) == replies:
                    s.sendall(frame(0x8, struct.pack(">H", 1000)))
    except (EOFError, OSError):
        pass
    out(**result)


T, B, C, PING = 0x1, 0x2, 0x0, 0x9

if GROUP == "clients":
    # A real client: allowed, denied by path, refused upgrade; it offers
    # permessage-deflate (the websockets default).
    client_step("allowed", "rt.test", "/v1/realtime/allowed", ["hello", "again"])
    client_step("denied", "rt.test", "/v1/realtime/admin/denied", ["drop everything"])
    client_step("not-allowed-path", "rt.test", "/v2/elsewhere", ["never"])
    client_step("server-refuses", "rt.test", "/v1/realtime/missing", ["never"])
    client_step("credentialed-text", "cred.test", "/stream/text", ["hi"])
    client_step("credentialed-binary", "cred.test", "/stream/binary", [b"\x00\x01"])
    client_step("credentialed-placeholder", "cred.test", "/stream/placeholder",
                ['{"token": "openshell-placeholder-tok-0123456789abcdef0123456789abcdef"}'])
    reflect_step("credentialed-reflect", "cred.test", "/stream/reflect")

    gql_step("gql-query", "query Viewer { viewer { login } }")
    gql_step("gql-subscription", "subscription Added { messageAdded }", subscribe=True)
    gql_step("gql-mutation", 'mutation Nuke { deleteRepository(name: "r") }')


if GROUP == "post-credential":
    # cred.test's credential covers POST only: the GET upgrade carries
    # none, yet the host is credentialed.
    client_step("post-only-text", "cred.test", "/stream/text", ["hi"])
    client_step("post-only-binary", "cred.test", "/stream/binary", [b"\x00\x01"])
    client_step("post-only-placeholder", "cred.test", "/stream/placeholder",
                ['{"token": "openshell-placeholder-tok-0123456789abcdef0123456789abcdef"}'])


if GROUP == "rewrite":
    # cred.test replaces its credential's placeholder in text messages
    # after an upgrade its binding covers (`/stream/**`); `far` is
    # rt.test's, never replaced on cred.test; `poster` is bound to
    # cred.test for POST only, so never replaced after a GET upgrade.
    tok, far = os.environ.get("TOKEN", ""), os.environ.get("FAR", "")
    poster = os.environ.get("POSTER", "")
    out(step="env", token=tok, far=far, poster=poster)
    client_step("rewrite-text", "cred.test", "/stream/rewrite", [json.dumps({"token": tok})])
    client_step("rewrite-fragments", "cred.test", "/stream/fragments",
                [['{"a": "', tok[:30], tok[30:] + '"}']])
    client_step("rewrite-foreign", "cred.test", "/stream/foreign", [json.dumps({"token": far})])
    client_step("rewrite-binary", "cred.test", "/stream/binary", [b"\x00\x01"])
    client_step("rewrite-outside-paths", "cred.test", "/outside/x", [json.dumps({"token": tok})])
    client_step("rewrite-outside-methods", "cred.test", "/stream/poster",
                [json.dumps({"token": poster})])


if GROUP == "raw":
    init = json.dumps({"type": "connection_init"}).encode()
    nuke = json.dumps({"type": "subscribe", "id": "1",
                       "payload": {"query": 'mutation { deleteRepository(name: "r") }'}}).encode()
    viewer = json.dumps({"type": "subscribe", "id": "1",
                         "payload": {"query": "query { viewer { login } }"}}).encode()
    response = json.dumps({"type": "next", "id": "1",
                           "payload": {"data": {"viewer": {"login": "x"}}}}).encode()
    cut = nuke.index(b"deleteRepository") + 3

    raw_step("split-denied", "gql.test", "/graphql?step=split-denied",
             frame(T, init) + frame(T, nuke[:cut], fin=False) + frame(C, nuke[cut:]))
    raw_step("split-allowed-ping", "gql.test", "/graphql?step=split-allowed-ping",
             frame(T, init) + frame(T, viewer[:20], fin=False) + frame(PING, b"p")
             + frame(C, viewer[20:]), replies=3)
    raw_step("client-sends-response", "gql.test", "/graphql?step=client-sends-response",
             frame(T, init) + frame(T, response))
    raw_step("unmasked", "rt.test", "/v1/realtime/unmasked", frame(T, b"x", mask=False))
    raw_step("rsv1", "rt.test", "/v1/realtime/rsv1", frame(T, b"x", rsv=0x40))
    raw_step("at-limit", "rt.test", "/v1/realtime/at-limit", frame(T, b"a" * LIMIT), replies=1)
    raw_step("over-limit", "rt.test", "/v1/realtime/over-limit",
             frame(T, b"a" * (LIMIT // 2), fin=False) + frame(C, b"a" * (LIMIT // 2 + 1)))
    raw_step("invalid-utf8", "rt.test", "/v1/realtime/invalid-utf8", frame(T, b"ok \xff"))
    raw_step("pipelined", "rt.test", "/v1/realtime/pipelined", frame(T, b"early"), pipelined=True, replies=1)
    raw_step("pipelined-denied", "rt.test", "/v1/realtime/admin/pipelined",
             frame(T, b"early"), pipelined=True)

    # Upgrades the proxy must refuse: h2c, and a WebSocket upgrade without
    # its key (`headers` given whole).
    raw_step("h2c", "rt.test", "/v1/realtime/h2c", b"", headers=None,
             extra="Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n")
    raw_step("no-key", "rt.test", "/v1/realtime/no-key", b"", headers=None,
             extra="Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n")


if GROUP == "reload":
    # Two open connections across a reload (the test sends it once
    # `first` exists, and writes `go` after): a message on the first is
    # judged by the new rules; the second, which they no longer allow, was
    # closed by the proxy.
    workdir = sys.argv[4]

    def timed(what, f):
        # How long each part took, for a run that times out.
        start = time.monotonic()
        try:
            return f()
        finally:
            print(f"{what}: {time.monotonic() - start:.3f} s", file=sys.stderr, flush=True)

    for host in ("rt.test", "gql.test"):
        timed(f"resolving {host}", lambda: socket.getaddrinfo(host, PORT, type=socket.SOCK_STREAM))
    a = timed("connecting to rt.test", lambda: connect_sync(
        f"wss://rt.test:{PORT}/v1/realtime/reload", open_timeout=20))
    b = timed("connecting to gql.test", lambda: connect_sync(
        f"wss://gql.test:{PORT}/graphql?step=reload", open_timeout=20,
        subprotocols=["graphql-transport-ws"]))
    a.send("before")
    before = a.recv(timeout=20)
    b.send(json.dumps({"type": "connection_init"}))
    ack = b.recv(timeout=20)
    open(os.path.join(workdir, "first"), "w").close()
    while not os.path.exists(os.path.join(workdir, "go")):
        time.sleep(0.02)
    closes = {}
    for name, ws, msg in (("rt", a, "after"), ("gql", b, None)):
        try:
            if msg:
                ws.send(msg)
            got = ws.recv(timeout=20)
            closes[name] = {"received": got}
        except ConnectionClosed as e:
            closes[name] = {"close": e.rcvd.code if e.rcvd else None}
    out(step="reload", before=before, ack=ack, **closes)
