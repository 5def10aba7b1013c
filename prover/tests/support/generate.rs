//! Random policies (as `.policy` text) and random requests, for the
//! differential tests. Deterministic: a seed gives the same policy.

use policy_bundle::eval::{HttpRequest, Request};

/// xorshift64*: small, deterministic, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }

    pub fn some<'a>(&mut self, xs: &[&'a str], max: usize) -> Vec<&'a str> {
        let n = 1 + self.below(max);
        let mut out: Vec<&str> = (0..n).map(|_| *self.pick(xs)).collect();
        out.sort_unstable();
        out.dedup();
        out
    }
}

pub const PIN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

const HOSTS: &[&str] = &[
    "api.github.com",
    "github.com",
    "example.com",
    "a.example.com",
    "*.example.com",
    "**.example.com",
    "api-*.example.com",
    "*.x.example.com",
    "pypi.org",
    "metadata.google.internal",
];
const ADDRS: &[&str] = &[
    "10.0.0.0/8",
    "10.1.0.0/16",
    "192.168.1.1",
    "169.254.169.254",
    "8.8.8.0/24",
    "[2001:db8::/32]",
    "[fe80::/10]",
];
const ALLOWED_IPS: &[&str] = &["10.1.0.0/16", "8.8.8.0/24", "192.168.1.1", "2001:db8::/48"];
const PORTS: &[&str] = &["443", "80,443", "8000-8100", "443,8443"];
const BINARIES: &[&str] = &[
    "/usr/bin/curl",
    "/usr/bin/git",
    "/usr/bin/python3",
    "/usr/bin/*",
    "/usr/bin/py*",
    "/opt/**/x",
    "/tmp/tool",
    "/tmp/*",
];
const METHODS: &[&str] = &["GET", "POST", "GET HEAD", "*", "PROPFIND", "DELETE PUT"];
const PATHS: &[&str] = &[
    "/**",
    "/repos/**",
    "/repos/*/*/pulls",
    "/repos/*/*/pulls/**",
    "/a/*",
    "/a/b",
    "/v[0-9]/x",
    "/**/info/refs",
    "/x%2Fy/*",
    "/*",
    "/",
    "/Repos/*/*/Pulls",
    "/a/b/",
];
const QUERIES: &[&str] = &[
    "",
    "",
    "",
    " ?state=open|closed",
    " ?page=[0-9]*",
    " ?ref=refs/heads/*",
    " ?v=dotted:1.*",
];
const PRESETS: &[&str] = &["read-only", "read-write", "full"];

/// A random policy in our language.
pub fn policy(rng: &mut Rng) -> String {
    let mut out = String::from("policy \"g\" {\n  fs read /usr /etc\n  fs exec /usr/bin\n");
    if rng.chance(50) {
        out.push_str("  fs write /tmp\n");
    }
    if rng.chance(30) {
        out.push_str("  fs read /run/secrets\n");
    }
    if rng.chance(40) {
        out.push_str("  binaries pinned = /usr/bin/curl sha256:");
        out.push_str(PIN);
        out.push('\n');
    } else {
        out.push_str("  binaries pinned = /usr/bin/wget\n");
    }
    for c in 0..rng.below(3) {
        let hosts = rng.some(&HOSTS[..8], 2).join(" ");
        out.push_str(&format!(
            "  credential c{c} {{\n    secret env T{c}\n    placeholder env T{c}\n    inject replace\n    hosts {hosts}\n"
        ));
        if rng.chance(40) {
            out.push_str(&format!(
                "    methods {}\n",
                rng.pick(&["GET", "GET HEAD", "POST"])
            ));
        }
        if rng.chance(40) {
            out.push_str(&format!(
                "    paths {}\n",
                rng.some(&PATHS[..8], 2).join(" ")
            ));
        }
        out.push_str("  }\n");
    }
    if rng.chance(30) {
        let file = rng.pick(&["/run/secrets/tok", "/home/u/tok", "/tmp/tok"]);
        let hosts = rng.some(&HOSTS[..8], 2).join(" ");
        if rng.chance(50) {
            out.push_str(&format!("  secret s1 file {file} hosts {hosts}\n"));
        } else {
            out.push_str(&format!("  secret s1 env S1 hosts {hosts}\n"));
        }
    }
    for _ in 0..1 + rng.below(5) {
        out.push_str(&endpoint(rng));
    }
    out.push_str("}\n");
    out
}

fn endpoint(rng: &mut Rng) -> String {
    let mut bins = rng.some(BINARIES, 3);
    if rng.chance(15) {
        bins.push("pinned");
    }
    let address_dest = rng.chance(25);
    let dest = if address_dest {
        (*rng.pick(ADDRS)).to_owned()
    } else {
        (*rng.pick(HOSTS)).to_owned()
    };
    let ports = rng.pick(PORTS);
    let kind = if address_dest {
        *rng.pick(&["", "", "tcp", "http"])
    } else {
        *rng.pick(&["", "tcp", "http", "http", "http", "http", "rpc"])
    };
    let mut opts = Vec::new();
    let mut block = Vec::new();
    if kind == "rpc" {
        let r = super::rpc::Rpc::random(rng);
        opts.push(r.options().trim_start().to_owned());
        block.extend(r.lines());
        if rng.chance(15) {
            block.push(format!(
                "path {}",
                rng.pick(&["/repos/**", "/a/*", "/**", "/A/b/"])
            ));
            if rng.chance(40) {
                opts.push("fold_paths".to_owned());
            }
        }
    } else if kind == "http" {
        opts.push("http".to_owned());
        if rng.chance(10) {
            opts.push("tls skip".to_owned());
        }
        if rng.chance(25) {
            opts.push("audit".to_owned());
        }
        if rng.chance(10) {
            opts.push("encoded_slash".to_owned());
        }
        if rng.chance(20) {
            opts.push("fold_paths".to_owned());
        }
        let preset = rng.chance(40);
        if preset {
            opts.push((*rng.pick(PRESETS)).to_owned());
        }
        let n_allow = if preset { 0 } else { 1 + rng.below(3) };
        for _ in 0..n_allow {
            block.push(format!(
                "allow {} {}{}",
                rng.pick(METHODS),
                rng.some(PATHS, 2).join(" "),
                rng.pick(QUERIES)
            ));
        }
        for _ in 0..rng.below(3) {
            block.push(format!(
                "deny {} {}{}",
                rng.pick(METHODS),
                rng.some(PATHS, 2).join(" "),
                rng.pick(QUERIES)
            ));
        }
        if rng.chance(15) {
            block.push(format!("path {}", rng.pick(&["/repos/**", "/a/*", "/**"])));
        }
    } else if !kind.is_empty() {
        opts.push(kind.to_owned());
    }
    if !address_dest && rng.chance(25) {
        block.push(format!("addresses {}", rng.pick(ALLOWED_IPS)));
    }
    let mut s = format!("  allow {} -> {dest}:{ports}", bins.join(" "));
    for o in &opts {
        s.push(' ');
        s.push_str(o);
    }
    if block.is_empty() {
        s.push('\n');
    } else {
        s.push_str(" {\n");
        for b in block {
            s.push_str("    ");
            s.push_str(&b);
            s.push('\n');
        }
        s.push_str("  }\n");
    }
    s
}

const REQ_BINS: &[&str] = &[
    "/usr/bin/curl",
    "/usr/bin/git",
    "/usr/bin/python3",
    "/usr/bin/python3.12",
    "/usr/bin/wget",
    "/opt/x",
    "/opt/a/b/x",
    "/tmp/tool",
    "/tmp/other",
    "/home/u/bin/x",
];
const REQ_HOSTS: &[&str] = &[
    "api.github.com",
    "API.GitHub.com.",
    "github.com",
    "example.com",
    "a.example.com",
    "z.example.com",
    "a.b.example.com",
    "api-eu.example.com",
    "q.x.example.com",
    "pypi.org",
    "metadata.google.internal",
    "metadata",
    "10.1.2.3",
    "other.net",
];
const REQ_ADDRS: &[&str] = &[
    "10.1.2.3",
    "10.200.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "8.8.8.8",
    "1.1.1.1",
    "2001:db8::1",
    "2001:db8:1::1",
    "::ffff:10.1.2.3",
    "fe80::1",
];
const REQ_PORTS: &[u16] = &[443, 80, 8080, 8050, 8443, 22];
const REQ_METHODS: &[&str] = &["GET", "POST", "HEAD", "DELETE", "PROPFIND", "get", "PUT"];
const REQ_PATHS: &[&str] = &[
    "/",
    "/repos",
    "/repos/o/r/pulls",
    "/repos/o/r/pulls/1",
    "/a/",
    "/a/b",
    "/a/c",
    "/v1/x",
    "/x/info/refs",
    "/info/refs",
    "/repos/o/r/../x",
    "/x%2Fy/z",
    "/reposx",
    "/%61/b",
    "/REPOS/o/r/PULLS",
    "/Repos/o/r/pulls/",
    "/A/B/",
    "/V1/X",
];
const REQ_QUERIES: &[&str] = &[
    "",
    "",
    "?state=open",
    "?state=open&state=all",
    "?state=closed&page=2",
    "?page=2&page=x",
    "?ref=refs%2Fheads%2Fmain",
    "?v=1.2",
    "?v=1.2.3",
];

/// A random request.
pub fn request(rng: &mut Rng) -> Request {
    let host = rng.chance(85).then(|| (*rng.pick(REQ_HOSTS)).to_owned());
    let addr = (host.is_none() || rng.chance(30)).then(|| rng.pick(REQ_ADDRS).parse().unwrap());
    Request {
        binary: (*rng.pick(REQ_BINS)).to_owned(),
        sha256: rng.chance(20).then(|| PIN.to_owned()),
        host,
        addr,
        port: *rng.pick(REQ_PORTS),
        http: Some(HttpRequest {
            method: (*rng.pick(REQ_METHODS)).to_owned(),
            target: format!("{}{}", rng.pick(REQ_PATHS), rng.pick(REQ_QUERIES)),
        }),
    }
}
