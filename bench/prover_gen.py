#!/usr/bin/env python3
"""Generate two large policies for the prover benchmark.

OLD and NEW have N endpoints over B binaries (sets of five), credentials
bound to every service domain, wildcard, CIDR and L4 rules mixed in. NEW is
OLD with one widening buried in the middle: one endpoint's deny rule is
removed, so POST to /admin/** on that credentialed host becomes possible.

Usage: prover_gen.py OUT_DIR [ENDPOINTS] [BINARIES]
"""
import os
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
b = int(sys.argv[3]) if len(sys.argv) > 3 else 50
buried = n * 2 // 3

PATHS = ["/api/v1/**", "/api/v2/items/*", "/repos/*/*/issues", "/repos/*/*/pulls/**",
         "/v1/models", "/v1/messages", "/health", "/graphql", "/upload/*", "/static/**"]
DOMAINS = 20


def policy(widened):
    lines = ['policy "bench" {', "  fs read /usr /etc", "  fs exec /usr/bin /usr/local/bin",
             "  fs write /sandbox /tmp"]
    for d in range(DOMAINS):
        lines += [f"  credential token{d} {{", f"    secret env TOKEN{d}", f"    placeholder env TOKEN{d}",
                  "    inject replace", f"    hosts **.corp{d}.example.com", "  }"]
    for s in range(b // 5):
        members = " ".join(f"/usr/bin/tool{s * 5 + k}" for k in range(5))
        lines.append(f"  binaries set{s} = {members}")
    for i in range(n):
        who = f"set{i % (b // 5)}"
        host = f"svc{i}.corp{i % DOMAINS}.example.com"
        if i % 50 == 7:
            lines.append(f"  allow {who} -> 10.{i % 200}.0.0/16:5432")
            continue
        if i % 50 == 13:
            lines.append(f"  allow {who} -> *.cdn{i % 40}.example.net:443 http read-only")
            continue
        if i % 20 == 3:
            lines.append(f"  allow {who} -> {host}:22")
            continue
        allow = " ".join(PATHS[(i + k) % len(PATHS)] for k in range(3))
        lines.append(f"  allow {who} -> {host}:443 http {{")
        lines.append(f"    allow GET HEAD {allow}")
        lines.append(f"    allow POST {PATHS[i % len(PATHS)]}")
        lines.append("    allow * /admin/**")
        if not (widened and i == buried):
            lines.append("    deny * /admin/**")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "old.policy"), "w") as f:
    f.write(policy(False))
with open(os.path.join(out, "new.policy"), "w") as f:
    f.write(policy(True))
print(f"svc{buried}.corp{buried % DOMAINS}.example.com")
