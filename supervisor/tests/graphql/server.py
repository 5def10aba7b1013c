"""A GraphQL-over-HTTP server for the proxy tests: graphql-core executes
every request it is sent, over TLS, as a lenient server would.

argv: the record file, certificate and key files. Prints its port once it
listens. Every HTTP request is one JSON line in the record file: method,
path, raw query string, Content-Type, Authorization, body, and the root
fields graphql-core executed for it (type, operation name, field). A
`deleteRepository` that runs also leaves a line in RECORD.deleted.

Lenient on purpose, like the servers an attacker looks for: it reads a
POST body by its Content-Type (JSON, `application/graphql`, forms, and
JSON for anything else), keeps the last of duplicate JSON keys, runs
mutations sent by GET, answers batches, and runs the documents of its own
persisted-query registry for hash-only requests. It serves GraphQL on
every path (a router that ignores case and trailing slashes, and more),
and splits a GET query string on `;` as well as `&` (as Python did
before 3.9.2, and other servers still do), keeping the last of repeated
parameters.
"""
import hashlib, json, socket, ssl, sys, threading, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from graphql import build_schema, graphql_sync, parse, get_operation_ast

record_file, cert, key = sys.argv[1:4]
lock = threading.Lock()
released = threading.Event()
local = threading.local()

SCHEMA = build_schema("""
type Query { viewer: User! repository(name: String!): Repo release: Boolean! }
type User { login: String! }
type Repo { name: String! }
type Mutation {
  createIssue(title: String!): String!
  addComment(body: String!): String!
  deleteRepository(name: String!): Boolean!
}
type Subscription { ticks: Int! }
""")

# What the server stored under each hash: the documents a client may send
# by hash alone.
REGISTERED = [
    "query Viewer { viewer { login } }",
    'mutation Nuke { deleteRepository(name: "r") }',
]
REGISTRY = {hashlib.sha256(d.encode()).hexdigest(): d for d in REGISTERED}


def ran(info):
    local.executed.append({
        "type": info.operation.operation.value,
        "name": info.operation.name.value if info.operation.name else None,
        "field": info.field_name,
    })


class Root:
    def viewer(self, info):
        ran(info)
        return {"login": "octocat"}

    def repository(self, info, name):
        ran(info)
        return {"name": name}

    def release(self, info):
        ran(info)
        released.set()
        return True

    def createIssue(self, info, title):
        ran(info)
        return "issue: " + title

    def addComment(self, info, body):
        ran(info)
        return "comment: " + body

    def deleteRepository(self, info, name):
        ran(info)
        with lock, open(record_file + ".deleted", "a") as f:
            f.write(name + "\n")
        return True


def requests_from(method, query_string, content_type, body):
    """The GraphQL requests the HTTP request carries, as this server reads it."""
    if method == "GET":
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(query_string.replace(";", "&")).items()}
        for k in ("variables", "extensions"):
            if k in params:
                params[k] = json.loads(params[k])
        return params
    media = content_type.split(";")[0].strip().lower()
    if media == "application/graphql":
        return {"query": body.decode()}
    if media == "application/x-www-form-urlencoded":
        return {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode()).items()}
    return json.loads(body)


def execute(req):
    if not isinstance(req, dict):
        return {"errors": [{"message": "not a request object"}]}
    query = req.get("query")
    ext = req.get("extensions") or {}
    if not query:
        h = (ext.get("persistedQuery") or {}).get("sha256Hash") or req.get("id")
        query = REGISTRY.get(h)
        if query is None:
            return {"errors": [{"message": "PersistedQueryNotFound"}]}
    result = graphql_sync(SCHEMA, query, root_value=Root(),
                          variable_values=req.get("variables"),
                          operation_name=req.get("operationName"))
    out = {"data": result.data}
    if result.errors:
        out["errors"] = [{"message": e.message} for e in result.errors]
    return out


def subscription(req):
    """The subscription a request asks for, when it is one."""
    try:
        doc = parse(req.get("query") or "")
        op = get_operation_ast(doc, req.get("operationName"))
    except Exception:
        return None
    if op is None or op.operation.value != "subscription":
        return None
    return op


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.request.settimeout(30)
        self.request.do_handshake()
        super().setup()

    def log_message(self, *args):
        pass

    def handle_one(self, method):
        path, _, qs = self.path.partition("?")
        body = b""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        local.executed = []
        seen = {
            "method": method, "path": path, "query": qs,
            "content_type": self.headers.get("Content-Type"),
            "content_length": self.headers.get("Content-Length"),
            "transfer_encoding": self.headers.get("Transfer-Encoding"),
            "authorization": self.headers.get("Authorization"),
            "body": body.decode("utf-8", "replace"),
            "executed": local.executed,
        }
        try:
            req = requests_from(method, qs, self.headers.get("Content-Type") or "", body)
            sub = None if isinstance(req, list) else subscription(req)
            if sub is not None:
                return self.stream(sub, seen)
            if isinstance(req, list):
                answer = [execute(r) for r in req]
            else:
                answer = execute(req)
            status = 200
        except Exception as e:
            answer, status = {"errors": [{"message": "bad request: " + repr(e)}]}, 400
        self.record(seen)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/graphql-response+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, op, seen):
        """An event stream: one event, then a second only once a `release`
        query arrived (or 20 s passed), then the end. A client that gets
        the first event before it sends `release` got it unbuffered."""
        seen["executed"].append({"type": "subscription",
                                 "name": op.name.value if op.name else None,
                                 "field": "ticks"})
        self.record(seen)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        released.clear()
        chunk(b'event: next\ndata: {"data":{"ticks":1}}\n\n')
        got = released.wait(20)
        chunk(b'event: next\ndata: {"data":{"ticks":2},"released":%s}\n\n'
              % (b"true" if got else b"false"))
        chunk(b"event: complete\ndata:\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def record(self, seen):
        with lock, open(record_file, "a") as f:
            f.write(json.dumps(seen) + "\n")

    def do_GET(self):
        self.handle_one("GET")

    def do_POST(self):
        self.handle_one("POST")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = self.socket.accept()
        return CONTEXT.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr


CONTEXT = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CONTEXT.load_cert_chain(cert, key)
server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
