#!/usr/bin/env python3
"""How much narrower `suggest` is than what the authors wrote, on the
community fixtures' histories (bench/suggest-history.sh, issue 27).

For each consecutive pair (EARLIER, LATER) of one sandbox's OpenShell YAML:

1. Candidate requests are read from LATER's `network_policies`: every
   binary (a glob instantiated to one path) x endpoint host (a host glob
   instantiated to one name) x port, and per endpoint
   - `protocol: rest` with `rules`: each `allow` method and path (a path
     pattern instantiated to one concrete path, `*` method as GET);
   - `protocol: rest` with an `access` preset: the preset's methods on `/`;
   - no `protocol`: one connection.
   A candidate is a new endpoint when the evaluator allows it under LATER
   and denies it under EARLIER. A connection EARLIER already allows (it
   inspects that destination) is replayed as `GET /` when that is denied.
2. Each new endpoint becomes one denial line under EARLIER's bundle digest
   (a refused connection, class 4001, or a request refused by the L7 proxy,
   class 4002), and `suggest EARLIER --from LOG --format policy` writes the
   patched YAML (SUGGESTED).
3. The sampled domain: binaries x hosts x ports x methods x paths, the
   union of what both versions name (globs instantiated twice), the denied
   requests themselves, methods GET HEAD OPTIONS POST PUT PATCH DELETE, and
   per rule path its instantiation, a sibling (last segment replaced) and a
   deeper path (one segment added), plus `/` and `/sampled/other`.
   Every request of the domain is decided under EARLIER, SUGGESTED and
   LATER, each compiled to a bundle once. The decisions are `eval`'s:
   `openshell-policy test` runs them in one process per bundle and asks
   the same function `eval` does; a seeded sample of requests per pair is
   also asked of `eval` itself, and any disagreement is reported.
4. suggested-extra = requests SUGGESTED allows and EARLIER denies;
   authors-extra = requests LATER allows and EARLIER denies.

Usage: suggest_history.py BIN WORKDIR FIXTURES > report
"""
import json
import os
import random
import re
import subprocess
import sys
import time

import yaml

BIN, WORK, FIX = sys.argv[1], sys.argv[2], sys.argv[3]
METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]
PRESETS = {
    "read-only": ["GET", "HEAD", "OPTIONS"],
    "read-write": ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH"],
    "full": METHODS,
}
CHUNK = 15000  # cases per test file
EVAL_SAMPLE = 40  # requests per pair also decided by `eval`, one process each
PUBLIC_IP = "140.82.112.6"

# Histories: `community/<sandbox>/vN.yaml` are ordered; `community-more`
# records no order, so only pairs whose order the upstream repository's
# ancestry shows are ordered, and the two whose order it does not show
# are replayed both ways.
ORDERED_MORE = {
    "sandboxes-nemoclaw-policy": ["d5073c3", "754c756"],
    "sandboxes-test-policy": ["ace0a2a", "ce648a3"],
    "traits-capability-ratchet-ratchet-policy": ["e2abe0c", "01a3f6d"],
}
UNORDERED_MORE = {
    "sandboxes-droid-policy": ["2d66abc", "b4e0241"],
    "sandboxes-gemini-policy": ["2d66abc", "48dfe92"],
}


def pairs():
    out = []
    base = os.path.join(FIX, "community")
    for sandbox in sorted(os.listdir(base)):
        d = os.path.join(base, sandbox)
        if not os.path.isdir(d):
            continue
        vs = sorted((f for f in os.listdir(d) if re.fullmatch(r"v\d+\.yaml", f)),
                    key=lambda f: int(f[1:-5]))
        for a, b in zip(vs, vs[1:]):
            out.append((f"community/{sandbox} {a[:-5]}→{b[:-5]}",
                        os.path.join(d, a), os.path.join(d, b)))
    more = os.path.join(FIX, "community-more")
    for sandbox, (a, b) in ORDERED_MORE.items():
        out.append((f"community-more/{sandbox} {a}→{b}",
                    os.path.join(more, sandbox, a + ".yaml"), os.path.join(more, sandbox, b + ".yaml")))
    for sandbox, (a, b) in UNORDERED_MORE.items():
        for x, y in ((a, b), (b, a)):
            out.append((f"community-more/{sandbox} {x}→{y} (order unknown)",
                        os.path.join(more, sandbox, x + ".yaml"), os.path.join(more, sandbox, y + ".yaml")))
    return out


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def compile_bundle(policy, out):
    r = run([BIN, "compile", policy, "-o", out])
    if r.returncode != 0:
        first = next((l.strip() for l in r.stderr.splitlines() if l.strip().startswith(("×", "error"))),
                     r.stderr.strip().splitlines()[0] if r.stderr.strip() else f"exit {r.returncode}")
        raise RuntimeError(f"compile {os.path.basename(policy)}: {first}")
    m = re.search(r"sha256:[0-9a-f]{64}", r.stdout)
    return m.group(0)


# --- instantiating the YAML's patterns ------------------------------------

def inst_binary(p, alt=False):
    # `**` stands for one or more segments here (import reads `DIR/**` as `DIR/*/**`)
    s = p.replace("**", "w" if alt else "x/y")
    return s.replace("*", "w" if alt else "x")


def inst_host(h, alt=False):
    return h.replace("**", "w.v" if alt else "x").replace("*", "w" if alt else "x")


def inst_path(p, alt=False):
    segs = p.split("/")
    out = []
    for s in segs:
        if s == "**":
            out.append("w" if alt else "a/b")
        elif s == "*":
            out.append("w" if alt else "x")
        else:
            # a `*` inside a segment: empty, or a few characters
            out.append(s.replace("**", "").replace("*", "-w" if alt else ""))
    q = "/".join(out)
    return q if q.startswith("/") else "/" + q


def sibling(path):
    head, _, last = path.rstrip("/").rpartition("/")
    return (head or "") + "/sibling" if last else "/sibling"


def deeper(path):
    return path.rstrip("/") + "/deeper"


def endpoints(doc):
    """(binaries, endpoint) per network policy of an OpenShell YAML document."""
    for _, np in sorted(((doc or {}).get("network_policies") or {}).items()):
        if not isinstance(np, dict):
            continue
        bins = [b.get("path") for b in np.get("binaries") or [] if isinstance(b, dict) and b.get("path")]
        for ep in np.get("endpoints") or []:
            if isinstance(ep, dict):
                yield bins, ep


def ep_ports(ep):
    ports = ep.get("ports") or ([ep["port"]] if "port" in ep else [])
    return [int(p) for p in ports]


def ep_rules(ep):
    """(method, path pattern) the endpoint's allow rules name."""
    for r in ep.get("rules") or []:
        a = (r or {}).get("allow") if isinstance(r, dict) else None
        if isinstance(a, dict) and "path" in a:
            yield str(a.get("method", "*")), str(a["path"])


def candidates(doc):
    """Requests LATER's YAML names: (binary, host, port, method|None, path|None)."""
    out = []
    for bins, ep in endpoints(doc):
        host = ep.get("host")
        if not host:
            continue  # an `allowed_ips`-only endpoint names no host to request
        for b in bins:
            for port in ep_ports(ep):
                key = (inst_binary(b), inst_host(str(host)), port)
                if ep.get("protocol") == "rest":
                    rules = list(ep_rules(ep))
                    if rules:
                        for m, p in rules:
                            out.append(key + ("GET" if m == "*" else m.upper(), inst_path(p)))
                    else:
                        for m in PRESETS.get(ep.get("access", "full"), METHODS):
                            out.append(key + (m, "/"))
                else:
                    out.append(key + (None, None))
    return list(dict.fromkeys(out))


def domain(docs, denied):
    bins, hosts, ports, paths = set(), set(), set(), {"/", "/sampled/other"}
    for doc in docs:
        for bs, ep in endpoints(doc):
            for b in bs:
                bins.add(inst_binary(b))
                bins.add(inst_binary(b, alt=True))
            if ep.get("host"):
                hosts.add(inst_host(str(ep["host"])))
                hosts.add(inst_host(str(ep["host"]), alt=True))
            ports.update(ep_ports(ep))
            for _, p in ep_rules(ep):
                for q in (inst_path(p), inst_path(p, alt=True)):
                    paths.update((q, sibling(q), deeper(q)))
    for b, h, port, m, p in denied:
        bins.add(b)
        hosts.add(h)
        ports.add(port)
        if p:
            paths.add(p)
    return [(b, h, port, m, p) for b in sorted(bins) for h in sorted(hosts) for port in sorted(ports)
            for m in METHODS for p in sorted(paths)]


def url(h, port, p):
    return f"https://{h}{p}" if port == 443 else f"http://{h}:{port}{p}"


# --- deciding requests ----------------------------------------------------

def decide(bundle, reqs, tag):
    """Decision of each request under BUNDLE, in one `openshell-policy test` run
    (the requests split into files of CHUNK cases: a test file is read as at
    most 200,000 YAML nodes)."""
    paths = []
    for n in range(0, len(reqs), CHUNK):
        path = os.path.join(WORK, f"{tag}.{n // CHUNK:03d}.test.yaml")
        paths.append(path)
        with open(path, "w") as f:
            f.write(f"bundle: {json.dumps(os.path.abspath(bundle))}\ncases:\n")
            for b, h, port, m, p in reqs[n:n + CHUNK]:
                if m is None:
                    f.write(f"  - {{binary: {json.dumps(b)}, host: {json.dumps(h)}, port: {port}, expect: allow}}\n")
                else:
                    f.write(f"  - {{binary: {json.dumps(b)}, url: {json.dumps(url(h, port, p))}, "
                            f"method: {m}, expect: allow}}\n")
    if not paths:
        return []
    r = run([BIN, "test", *paths, "--format", "json"])
    doc = json.loads(r.stdout)
    if doc.get("errors"):
        raise RuntimeError(f"test {tag}: {doc['errors'][0].get('message')}")
    by_path = {os.path.abspath(f["path"]): f["cases"] for f in doc["files"]}
    out = []
    for path in paths:
        out += [c["actual"]["decision"] for c in by_path.get(os.path.abspath(path), [])]
    if len(out) != len(reqs):
        raise RuntimeError(f"test {tag}: {len(out)} decisions for {len(reqs)} requests")
    return out


def eval_one(bundle, req):
    b, h, port, m, p = req
    args = [BIN, "eval", "--bundle", bundle, "--binary", b, "--format", "json"]
    args += ["--host", h, "--port", str(port)] if m is None else ["--url", url(h, port, p), "--method", m]
    return json.loads(run(args).stdout)["decision"]


# --- the deny log ---------------------------------------------------------

META = {"version": "1.3.0", "product": {"name": "openshell-supervisor",
        "vendor_name": "openshell-policy", "version": "0.1.0"}}
ACTIVITY = {"DELETE": 2, "GET": 3, "HEAD": 4, "OPTIONS": 5, "POST": 6, "PUT": 7}


def denial(digest, req):
    b, h, port, m, p = req
    e = {
        "class_uid": 4001, "class_name": "Network Activity", "category_uid": 4,
        "category_name": "Network Activity", "activity_id": 1, "activity_name": "Open",
        "type_uid": 400101, "severity_id": 3, "action_id": 2, "action": "Denied",
        "disposition_id": 2, "disposition": "Blocked", "status_id": 2, "status": "Failure",
        "message": "no rule allows this binary to reach this destination",
        "actor": {"process": {"pid": 100, "tid": 101, "file": {"path": b}}},
        "dst_endpoint": {"hostname": h, "ip": PUBLIC_IP, "port": port},
        "connection_info": {"protocol_name": "tcp", "direction": "Outbound", "direction_id": 2},
        "firewall_rule": {"name": "default", "type": "default deny"},
        "unmapped": {"syscall": "connect", "address": None, "note": None},
        "time": 1767000000000, "policy": {"uid": digest}, "metadata": META,
    }
    if m is not None:
        act = ACTIVITY.get(m, 99)
        e.update({
            "class_uid": 4002, "class_name": "HTTP Activity", "activity_id": act,
            "activity_name": m, "type_uid": 400200 + act,
            "message": f"{m} {p} matches no allow rule",
            "firewall_rule": {"name": "policy rule", "type": "policy rule"},
            "unmapped": {"syscall": "", "address": None, "note": None,
                         "error": "policy_denied", "audit": False},
            "http_request": {"http_method": m, "url": {
                "hostname": h, "path": p, "port": port, "scheme": "https" if port == 443 else "http"}},
        })
    return json.dumps(e, separators=(",", ":"))


# --- one pair -------------------------------------------------------------

def one(label, tag, earlier, later):
    t0 = time.monotonic()
    d = os.path.join(WORK, tag)
    os.makedirs(d, exist_ok=True)
    e_bundle, l_bundle, s_bundle = (os.path.join(d, n) for n in ("earlier.bundle", "later.bundle", "suggested.bundle"))
    digest = compile_bundle(earlier, e_bundle)
    compile_bundle(later, l_bundle)
    with open(earlier) as f:
        e_doc = yaml.safe_load(f)
    with open(later) as f:
        l_doc = yaml.safe_load(f)

    cands = candidates(l_doc)
    in_l = decide(l_bundle, cands, f"{tag}/cand-later")
    in_e = decide(e_bundle, cands, f"{tag}/cand-earlier")
    new = [c for c, a, b in zip(cands, in_l, in_e) if a == "allow" and b != "allow"]
    # a connection EARLIER allows because it inspects the destination: the
    # widening to an uninspected one is replayed as `GET /`
    widened = [c[:3] + ("GET", "/") for c, a, b in zip(cands, in_l, in_e)
               if c[3] is None and a == "allow" and b == "allow"]
    if widened:
        wl = decide(l_bundle, widened, f"{tag}/wid-later")
        we = decide(e_bundle, widened, f"{tag}/wid-earlier")
        new += [c for c, a, b in zip(widened, wl, we) if a == "allow" and b != "allow"]
    new = list(dict.fromkeys(new))
    if not new:
        return {"label": label, "status": "no new endpoints", "denials": 0,
                "secs": time.monotonic() - t0}

    log = os.path.join(d, "deny.log")
    with open(log, "w") as f:
        for req in new:
            f.write(denial(digest, req) + "\n")
    suggested = os.path.join(d, "suggested.yaml")
    r = run([BIN, "suggest", earlier, "--from", log, "--format", "policy"])
    with open(os.path.join(d, "suggest.stderr"), "w") as f:
        f.write(r.stderr)
    verdict = next((l for l in r.stderr.splitlines() if l.startswith("proof:")), "")
    head = next((l for l in r.stderr.splitlines() if l.startswith("suggest:")), "")
    if r.returncode not in (0, 1) or not r.stdout.strip():
        errs = [l for l in r.stderr.splitlines() if l.startswith("error")]
        return {"label": label, "status": f"suggest failed (exit {r.returncode}): "
                + (errs[0] if errs else (r.stderr.strip().splitlines() or ["no output"])[-1]),
                "denials": len(new), "secs": time.monotonic() - t0}
    with open(suggested, "w") as f:
        f.write(r.stdout)
    compile_bundle(suggested, s_bundle)

    dom = list(dict.fromkeys(domain([e_doc, l_doc], new) + [q for q in new if q[3] is None]))
    de = decide(e_bundle, dom, f"{tag}/dom-earlier")
    ds = decide(s_bundle, dom, f"{tag}/dom-suggested")
    dl = decide(l_bundle, dom, f"{tag}/dom-later")
    s_extra = sum(1 for a, b in zip(de, ds) if a != "allow" and b == "allow")
    l_extra = sum(1 for a, b in zip(de, dl) if a != "allow" and b == "allow")
    s_not_l = sum(1 for a, b, c in zip(de, ds, dl) if a != "allow" and b == "allow" and c != "allow")
    s_lost = sum(1 for a, b in zip(de, ds) if a == "allow" and b != "allow")
    replay = decide(s_bundle, new, f"{tag}/replay")
    still_denied = sum(1 for x in replay if x != "allow")

    # the batch against `eval` itself, on a seeded sample (half of it from
    # the requests the versions decide differently)
    rng = random.Random(27)
    differ = [i for i in range(len(dom)) if len({de[i], ds[i], dl[i]}) > 1]
    idx = rng.sample(differ, min(EVAL_SAMPLE // 2, len(differ)))
    idx += rng.sample(range(len(dom)), min(EVAL_SAMPLE - len(idx), len(dom)))
    mismatches = 0
    for i in idx:
        for bundle, dec in ((e_bundle, de), (s_bundle, ds), (l_bundle, dl)):
            if eval_one(bundle, dom[i]) != dec[i]:
                mismatches += 1
    return {
        "label": label, "status": "ok", "denials": len(new),
        "http_denials": sum(1 for q in new if q[3] is not None),
        "domain": len(dom), "suggested_extra": s_extra, "authors_extra": l_extra,
        "suggested_not_authors": s_not_l, "suggested_lost": s_lost,
        "still_denied": still_denied, "exit": r.returncode,
        "head": head.strip(), "verdict": verdict.strip(),
        "eval_checked": 3 * len(idx), "eval_mismatches": mismatches,
        "secs": time.monotonic() - t0,
    }


def main():
    os.makedirs(WORK, exist_ok=True)
    results = []
    for n, (label, earlier, later) in enumerate(pairs()):
        try:
            res = one(label, f"p{n:02d}", earlier, later)
        except (RuntimeError, ValueError, KeyError, json.JSONDecodeError, yaml.YAMLError) as e:
            res = {"label": label, "status": f"failed: {e}", "denials": 0, "secs": 0.0}
        results.append(res)
        print(json.dumps(res), file=sys.stderr, flush=True)

    print("| pair | denials replayed (HTTP) | domain | suggested-extra | authors-extra | authors / suggested | suggest exit | s. time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    tot = {"denials": 0, "domain": 0, "s": 0, "l": 0}
    for r in results:
        if r["status"] != "ok":
            print(f"| {r['label']} | {r['denials']} | | | | {r['status']} | | {r['secs']:.1f} s |")
            continue
        ratio = f"{r['authors_extra'] / r['suggested_extra']:.1f}×" if r["suggested_extra"] else "—"
        print(f"| {r['label']} | {r['denials']} ({r['http_denials']}) | {r['domain']} | {r['suggested_extra']} "
              f"| {r['authors_extra']} | {ratio} | {r['exit']} | {r['secs']:.1f} s |")
        tot["denials"] += r["denials"]
        tot["domain"] += r["domain"]
        tot["s"] += r["suggested_extra"]
        tot["l"] += r["authors_extra"]
    ratio = f"{tot['l'] / tot['s']:.1f}×" if tot["s"] else "—"
    print(f"| **total** | {tot['denials']} | {tot['domain']} | {tot['s']} | {tot['l']} | {ratio} | | |")
    print()
    for r in results:
        if r["status"] == "ok":
            print(f"- {r['label']}: {r['head']} / {r['verdict']}; suggested admits {r['suggested_not_authors']} "
                  f"domain requests the authors' version does not, drops {r['suggested_lost']}; "
                  f"{r['still_denied']} denials still denied; eval agreed on "
                  f"{r['eval_checked'] - r['eval_mismatches']} of {r['eval_checked']} sampled decisions")


if __name__ == "__main__":
    main()
