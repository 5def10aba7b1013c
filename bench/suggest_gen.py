#!/usr/bin/env python3
"""A deny log of N lines for `suggest` (bench/suggest.sh): the policy's
name and digest on every line, in the supervisor's OCSF layout
(supervisor/src/denylog.rs). About 70% requests the L7 proxy refused
(4 binaries, 6 hosts, some 400 distinct paths, GET/POST/DELETE), 28%
refused connections (12 binaries, 30 host:port pairs), 2% other events
(allowed decisions, DNS refusals). Seeded: the same log every run.

Usage: suggest_gen.py LINES POLICY_NAME DIGEST > deny.log"""
import json
import random
import sys

lines, name, digest = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rng = random.Random(27)
meta = {"version": "1.3.0", "product": {"name": "openshell-supervisor",
        "vendor_name": "openshell-policy", "version": "0.1.0"}}


def net(binary, host, ip, port, denied=True):
    return {
        "class_uid": 4001, "class_name": "Network Activity", "category_uid": 4,
        "category_name": "Network Activity", "activity_id": 1, "activity_name": "Open",
        "type_uid": 400101, "severity_id": 3 if denied else 1,
        "action_id": 2 if denied else 1, "action": "Denied" if denied else "Allowed",
        "disposition_id": 2 if denied else 1, "disposition": "Blocked" if denied else "Allowed",
        "status_id": 2 if denied else 1, "status": "Failure" if denied else "Success",
        "message": "no rule allows this binary to reach this destination",
        "actor": {"process": {"pid": 100, "tid": 101, "file": {"path": binary}}},
        "dst_endpoint": {"hostname": host, "ip": ip, "port": port},
        "connection_info": {"protocol_name": "tcp", "direction": "Outbound", "direction_id": 2},
        "firewall_rule": {"name": "default", "type": "default deny"},
        "unmapped": {"syscall": "connect", "address": None, "note": None},
        "time": 1767000000000, "policy": {"name": name, "uid": digest}, "metadata": meta,
    }


def http(binary, host, method, path):
    e = net(binary, host, "140.82.112.6", 443)
    act = {"GET": 3, "POST": 6, "DELETE": 2}[method]
    e.update({"class_uid": 4002, "class_name": "HTTP Activity", "activity_id": act,
              "activity_name": method, "type_uid": 400200 + act,
              "message": f"{method} {path} matches no allow rule",
              "firewall_rule": {"name": "bench.policy:9 (/usr/bin/gh)", "type": "policy rule"},
              "http_request": {"http_method": method, "url": {
                  "hostname": host, "path": path, "port": 443, "scheme": "https"}}})
    e["unmapped"] = {"syscall": "", "address": None, "note": None,
                     "error": "policy_denied", "audit": False}
    return e


l7_bins = ["/usr/bin/gh", "/usr/bin/node", "/usr/local/bin/claude", "/usr/bin/git"]
l7_hosts = ["api.github.com", "uploads.github.com", "api.openai.com",
            "registry.npmjs.org", "pypi.org", "files.pythonhosted.org"]
paths = [f"/repos/org{o}/repo{r}/{k}" for o in range(8) for r in range(10)
         for k in ("pulls", "issues", "commits", "labels", "hooks")]
l4_bins = [f"/usr/bin/tool{i}" for i in range(12)]
l4_dests = [(f"svc{i}.example.com", f"93.184.216.{i}", 443 if i % 3 else 8443)
            for i in range(30)]

for _ in range(lines):
    r = rng.random()
    if r < 0.70:
        e = http(rng.choice(l7_bins), rng.choice(l7_hosts),
                 rng.choice(["GET", "GET", "POST", "DELETE"]), rng.choice(paths))
    elif r < 0.98:
        host, ip, port = rng.choice(l4_dests)
        e = net(rng.choice(l4_bins), host, ip, port)
    elif r < 0.99:
        e = net("/usr/bin/curl", "example.com", "93.184.216.34", 443, denied=False)
    else:
        e = {"class_uid": 4003, "class_name": "DNS Activity", "action_id": 2,
             "query": {"hostname": "evil.example", "type": "A"}, "rcode": "NXDomain",
             "policy": {"name": name, "uid": digest}, "metadata": meta}
    print(json.dumps(e, separators=(",", ":")))
