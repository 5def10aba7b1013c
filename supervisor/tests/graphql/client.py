"""A real GraphQL client through the proxy: gql with its httpx transport
(one keep-alive connection), then httpx alone for an event stream.

argv: the endpoint's URL. One JSON line per step; a step that fails prints
its error and, when there was an HTTP response, its status, its
`x-openshell-policy` header and its body.
"""
import json, sys, time

import httpx
from gql import Client, GraphQLRequest, gql
from gql.transport.exceptions import TransportServerError
from gql.transport.httpx import HTTPXTransport

url = sys.argv[1]


def out(**kw):
    print(json.dumps(kw), flush=True)


def step(name, run):
    try:
        out(step=name, ok=True, result=run())
    except TransportServerError as e:
        # The HTTP response the transport refused, when there was one.
        resp = getattr(e.__cause__, "response", None)
        out(step=name, ok=False, status=e.code, error=str(e),
            policy=resp.headers.get("x-openshell-policy") if resp is not None else None,
            body=resp.text if resp is not None else None)
    except Exception as e:
        out(step=name, ok=False, status=None, error=repr(e))


transport = HTTPXTransport(url=url, timeout=20)
with Client(transport=transport, fetch_schema_from_transport=False) as s:
    step("viewer", lambda: s.execute(gql("query Viewer { viewer { login } }")))
    step("create-issue", lambda: s.execute(
        gql("mutation IssueCreate($t: String!) { createIssue(title: $t) }"),
        variable_values={"t": "from gql"}))
    step("delete-repository", lambda: s.execute(
        gql('mutation IssueCleanup { deleteRepository(name: "r") }')))
    step("batch-allowed", lambda: s.execute_batch([
        GraphQLRequest("query Viewer { viewer { login } }"),
        GraphQLRequest('mutation IssueComment { addComment(body: "b") }'),
    ]))
    step("batch-mixed", lambda: s.execute_batch([
        GraphQLRequest("query Viewer { viewer { login } }"),
        GraphQLRequest('mutation IssueCleanup { deleteRepository(name: "r") }'),
    ]))
    step("after-refusals", lambda: s.execute(gql("{ repository(name: \"x\") { name } }")))


def stream():
    """A subscription answered as an event stream: the first event must
    arrive while the server still holds the second back, waiting for the
    `release` query sent only after that first event was read."""
    events = []
    with httpx.Client(timeout=30) as sub, httpx.Client(timeout=30) as other:
        body = {"query": "subscription Ticks { ticks }"}
        headers = {"Accept": "text/event-stream"}
        with sub.stream("POST", url, json=body, headers=headers) as r:
            status = r.status_code
            started = time.monotonic()
            for line in r.iter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                events.append({"data": json.loads(line[5:]),
                               "after": round(time.monotonic() - started, 3)})
                if len(events) == 1:
                    rel = other.post(url, json={"query": "query Release { release }"})
                    events[0]["release_status"] = rel.status_code
    return {"status": status, "events": events}


step("stream", stream)
