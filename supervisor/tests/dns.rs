//! The DNS stub against the real kernel: the workload's own resolver
//! (glibc, through python3 and curl) asks the stub the supervisor serves
//! inside its namespace; upstream is a fake server in the test's namespace.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::net::Ipv4Addr;

use common::{Dir, SYSTEM, TestNet, bundle, clients, log_lines, output, stderr, stdout};

struct Setup {
    net: TestNet,
    dir: Dir,
    bundle: std::path::PathBuf,
    upstream: std::net::SocketAddr,
    port: u16,
}

/// `api.test` is allowed (resolved upstream), `*.wild.test` too; the
/// upstream answers 127.0.0.1 for everything, and an HTTP server listens
/// there.
fn setup() -> Setup {
    let net = TestNet::new();
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    let upstream = common::dns_upstream(net.udp("127.0.0.1:0"), Ipv4Addr::LOCALHOST);
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  binaries clients = {}\n  allow clients -> api.test:{port} {{\n    addresses 127.0.0.1\n  }}\n  allow clients -> *.wild.test:{port} {{\n    addresses 127.0.0.0/8\n  }}\n",
        clients()
    );
    let bundle = bundle(&dir, "dns", &body);
    Setup {
        net,
        dir,
        bundle,
        upstream,
        port,
    }
}

impl Setup {
    fn run(&self, cmd: &[&str]) -> (std::process::Output, Vec<serde_json::Value>) {
        self.run_with(&[], cmd)
    }

    /// As `run`, with `extra` options before the command.
    fn run_with(
        &self,
        extra: &[&str],
        cmd: &[&str],
    ) -> (std::process::Output, Vec<serde_json::Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let upstream = self.upstream.to_string();
        let mut args = vec![
            "run",
            "--bundle",
            self.bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--dns-upstream",
            &upstream,
            "--log",
            log.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(cmd);
        let out = output(self.net.supervisor(&args, None));
        (out, log_lines(&log))
    }
}

const RESOLVE: &str = "import socket,sys\nfor name in sys.argv[1:]:\n  try:\n    print(name, sorted({a[4][0] for a in socket.getaddrinfo(name, 80)}))\n  except socket.gaierror as e:\n    print(name, 'error', e.errno)\n";

#[test]
fn an_allowed_name_resolves_through_the_stub_and_is_reachable_by_name() {
    let s = setup();
    let (out, log) = s.run(&["/usr/bin/python3", "-c", RESOLVE, "api.test", "x.wild.test"]);
    assert_eq!(
        stdout(&out),
        "api.test ['127.0.0.1']\nx.wild.test ['127.0.0.1']\n",
        "{}",
        stderr(&out)
    );
    assert!(log.is_empty(), "{log:?}");
    // The address is attributed to the name: the host rule decides.
    let url = format!("http://x.wild.test:{}/", s.port);
    let (out, log) = s.run(&["/usr/bin/curl", "-sS", "--max-time", "10", &url]);
    assert_eq!(stdout(&out), "ok", "{}", stderr(&out));
    assert!(log.is_empty(), "{log:?}");
}

#[test]
fn an_unlisted_name_does_not_resolve_and_is_logged() {
    let s = setup();
    let (out, log) = s.run(&["/usr/bin/python3", "-c", RESOLVE, "evil.test", "wild.test"]);
    // EAI_NONAME (-2): NXDOMAIN; the apex of a wildcard is not matched.
    assert_eq!(
        stdout(&out),
        "evil.test error -2\nwild.test error -2\n",
        "{}",
        stderr(&out)
    );
    let refused: Vec<&str> = log
        .iter()
        .filter(|l| l["class_uid"] == 4003)
        .map(|l| l["query"]["hostname"].as_str().unwrap())
        .collect();
    assert!(
        refused.contains(&"evil.test") && refused.contains(&"wild.test"),
        "{log:?}"
    );
}

/// Queries the workload writes itself on a socket connected to its first
/// nameserver (the stub, or a host's the broker redirects to it), as a
/// resolver does: a name with bytes no
/// host name has, another class, two questions, bytes that are no DNS
/// message. None is looked up, and each leaves a log line, since a name is
/// a channel out whether or not it resolves.
#[test]
fn a_malformed_query_is_refused_and_logged() {
    let s = setup();
    let code = r"import socket,struct
def q(labels,qclass=1,qd=1):
  name=b''.join(bytes([len(l)])+l for l in labels)+b'\0'
  return struct.pack('>HHHHHH',0x1234,0x0100,qd,0,0,0)+(name+struct.pack('>HH',1,qclass))*qd
ns=([l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver') and '.' in l]+['127.0.0.1'])[0]
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.settimeout(2); s.connect((ns,53))
for what,msg in (('odd',q([b'se\x00cr\xffet',b'api',b'test'])),('class',q([b'api',b'test'],qclass=3)),('two',q([b'api',b'test'],qd=2)),('garbage',b'\x01\x02\x03')):
  s.send(msg)
  try:
    print(what,s.recv(512)[3]&0xf)
  except socket.timeout:
    print(what,'no answer')
";
    let (out, log) = s.run(&["/usr/bin/python3", "-c", code]);
    assert_eq!(
        stdout(&out),
        "odd 3\nclass 5\ntwo 1\ngarbage no answer\n",
        "{}",
        stderr(&out)
    );
    let refused: Vec<(&str, &str)> = log
        .iter()
        .filter(|l| l["class_uid"] == 4003 && l["action"] == "Denied")
        .map(|l| {
            (
                l["query"]["hostname"].as_str().unwrap(),
                l["rcode"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        refused,
        [
            ("se\\000cr\\377et.api.test.", "NXDomain"),
            ("api.test.", "Refused"),
            ("", "FormErr"),
            ("", "none"),
        ],
        "{log:?}"
    );
}

/// Under `--netns none` the workload shares the supervisor's network, so
/// the stand-in resolver is reachable by what it sends unless the broker
/// refuses it: the same probe run there outside the sandbox reaches it
/// (the trap works), the sandboxed one does not. Under `--netns new` the
/// sandbox's namespace has no route to it anyway, and the broker refuses
/// all the same.
#[test]
fn a_query_sent_straight_to_an_outside_resolver_fails() {
    let s = setup();
    // A public resolver's address, hosted by the test's own namespace.
    s.net.host("8.8.8.8/32");
    let resolver = s.net.udp("8.8.8.8:53");
    resolver.set_nonblocking(true).unwrap();
    let code = "import socket\nfor how in ('sendto', 'connect'):\n  s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n  try:\n    s.sendto(b'q',('8.8.8.8',53)) if how=='sendto' else s.connect(('8.8.8.8',53))\n    print(how,'sent')\n  except OSError as e:\n    print(how,e.errno)\n";
    let mut buf = [0u8; 64];
    let control = std::process::Command::new("ip")
        .args(["netns", "exec", &s.net.name, "/usr/bin/python3", "-c", code])
        .output()
        .unwrap();
    assert_eq!(stdout(&control), "sendto sent\nconnect sent\n");
    let (n, _) = resolver.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"q", "the stand-in receives what is sent to it");
    for netns in ["none", "new"] {
        let (out, log) = s.run_with(&["--netns", netns], &["/usr/bin/python3", "-c", code]);
        assert_eq!(
            stdout(&out),
            "sendto 13\nconnect 13\n",
            "{netns}: {}",
            stderr(&out)
        );
        assert_eq!(log.len(), 2, "{netns}: {log:?}");
        for line in &log {
            assert_eq!(line["dst_endpoint"]["ip"], "8.8.8.8");
            assert_eq!(line["connection_info"]["protocol_name"], "udp");
        }
        let got = resolver.recv_from(&mut buf);
        assert!(
            matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{netns}: the resolver stand-in received a query: {got:?}"
        );
    }
}

#[test]
fn resolve_overrides_answer_without_upstream() {
    let s = setup();
    let log = s.dir.log();
    let out = output(s.net.supervisor(
        &[
            "run",
            "--bundle",
            s.bundle.to_str().unwrap(),
            "--workdir",
            s.dir.path().to_str().unwrap(),
            "--resolve",
            "api.test=127.0.0.2",
            "--log",
            log.to_str().unwrap(),
            "--",
            "/usr/bin/python3",
            "-c",
            RESOLVE,
            "api.test",
        ],
        None,
    ));
    assert_eq!(stdout(&out), "api.test ['127.0.0.2']\n", "{}", stderr(&out));
}
