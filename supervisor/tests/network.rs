//! Connection brokering against the real kernel: each test is a workload
//! (curl, python3, bash) that must reach an allowed server or must fail.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use common::{
    Dir, SYSTEM, TestNet, bundle, clients, log_lines, output, sandbox_id, stderr, stdout,
};

/// A sandbox allowed to reach `local.test:PORT` (the operator names
/// 127.0.0.1 for it), with a server listening there.
struct Setup {
    net: TestNet,
    dir: Dir,
    bundle: std::path::PathBuf,
    port: u16,
}

fn setup() -> Setup {
    setup_with(|_, port| format!("  allow clients -> local.test:{port}\n"))
}

/// As `setup`, with the rules `rules(dir, port)` gives.
fn setup_with(rules: impl Fn(&Dir, u16) -> String) -> Setup {
    let net = TestNet::new();
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  binaries clients = {}\n{}",
        clients(),
        rules(&dir, port)
    );
    let bundle = bundle(&dir, "net", &body);
    Setup {
        net,
        dir,
        bundle,
        port,
    }
}

impl Setup {
    fn run(&self, cmd: &[&str]) -> (std::process::Output, Vec<serde_json::Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let mut args = vec![
            "run",
            "--bundle",
            self.bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--resolve",
            "local.test=127.0.0.1",
            "--log",
            log.to_str().unwrap(),
            "--",
        ];
        args.extend_from_slice(cmd);
        let out = output(self.net.supervisor(&args, None));
        (out, log_lines(&log))
    }
}

/// Python that connects to HOST:PORT and prints `errno elapsed_ms`.
fn py_connect(family: &str, host: &str, port: u16) -> String {
    format!(
        "import socket,time,errno\ns=socket.socket(socket.{family},socket.SOCK_STREAM)\nt=time.monotonic()\ntry:\n  s.connect(('{host}',{port}))\n  print(0,0)\nexcept OSError as e:\n  print(e.errno,int((time.monotonic()-t)*1000))\n"
    )
}

#[test]
fn connect_to_an_allowed_host_and_port_succeeds() {
    let s = setup();
    let url = format!("http://local.test:{}/", s.port);
    let (out, log) = s.run(&["/usr/bin/curl", "-sS", "--max-time", "10", &url]);
    assert_eq!(stdout(&out), "ok", "{}", stderr(&out));
    assert!(out.status.success());
    assert!(log.is_empty(), "nothing to log: {log:?}");
}

/// An allowed connect is relayed: the workload's socket is connected
/// inside its own network namespace, to the sandbox, which carries its
/// bytes over the sandbox protocol to the supervisor, which connects
/// upstream. The workload's peer is therefore not the upstream's port,
/// and every byte still arrives.
#[test]
fn an_allowed_connect_is_relayed_through_the_sandbox() {
    let s = setup();
    let code = format!(
        "import socket\ns=socket.create_connection(('local.test',{}))\nprint(s.getpeername()[1])\ns.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\nd=b''\nwhile True:\n  c=s.recv(65536)\n  if not c: break\n  d+=c\nprint(d.split(b'\\r\\n\\r\\n',1)[1].decode())\n",
        s.port
    );
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    let printed = stdout(&out);
    let mut lines = printed.lines();
    let peer: u16 = lines
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{printed} {}", stderr(&out)));
    assert_ne!(peer, s.port, "the workload's socket is the relay's");
    assert_eq!(lines.next(), Some("ok"), "{printed} {}", stderr(&out));
    assert!(log.is_empty(), "{log:?}");
}

/// The refused port is not closed: a listener of the supervisor's
/// namespace waits there, where a connect the broker let through would
/// land (ECONNREFUSED from a closed port would prove nothing).
#[test]
fn a_disallowed_port_is_refused_at_once_and_logged() {
    let s = setup();
    let trap = s.net.trap_tcp("127.0.0.1:0");
    let other = trap.local_addr().unwrap().port();
    let code = py_connect("AF_INET", "local.test", other);
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert_no_connection(&trap);
    let printed = stdout(&out);
    let mut fields = printed.split_whitespace();
    assert_eq!(
        fields.next(),
        Some("111"),
        "ECONNREFUSED: {printed} {}",
        stderr(&out)
    );
    let ms: u64 = fields.next().unwrap().parse().unwrap();
    assert!(ms < 100, "refused after {ms} ms");
    let denied: Vec<_> = log.iter().filter(|l| l["action"] == "Denied").collect();
    assert_eq!(denied.len(), 1, "one line per decision: {log:?}");
    let line = denied[0];
    assert_eq!(line["dst_endpoint"]["hostname"], "local.test");
    assert_eq!(line["dst_endpoint"]["ip"], "127.0.0.1");
    assert_eq!(line["dst_endpoint"]["port"], other);
    assert_eq!(line["unmapped"]["sandbox"]["id"], sandbox_id());
    assert_eq!(line["unmapped"]["sandbox"]["generation"], 1);
    assert_eq!(
        line["actor"]["process"]["file"]["path"],
        common::exe("/usr/bin/python3")
    );
    assert_eq!(line["firewall_rule"]["name"], "default");
    assert!(line["message"].as_str().unwrap().contains("no rule allows"));
}

/// Fails the test if `trap` (non-blocking) has a connection waiting.
fn assert_no_connection(trap: &std::net::TcpListener) {
    let got = trap.accept();
    assert!(
        matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the trap got a connection: {got:?}"
    );
}

#[test]
fn the_ipv4_mapped_ipv6_form_of_a_refused_address_is_refused_too() {
    let s = setup();
    let trap = s.net.trap_tcp("127.0.0.1:0");
    let other = trap.local_addr().unwrap().port();
    // The workload asks for `local.test` first: the address is then named
    // for that host, whichever form it is written in.
    let asked = |port| {
        format!(
            "__import__('socket').getaddrinfo('local.test', 0)\n{}",
            py_connect("AF_INET6", "::ffff:127.0.0.1", port)
        )
    };
    let code = asked(other);
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert!(
        stdout(&out).starts_with("111 "),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["dst_endpoint"]["ip"], "127.0.0.1", "decided as IPv4");
    assert_no_connection(&trap);
    // The allowed port through the mapped form is the same decision: allowed.
    let code = asked(s.port);
    let (out, _) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert_eq!(stdout(&out).trim(), "0 0", "{}", stderr(&out));
}

/// A connection to a bare address is the address's, even where the
/// operator named the address for a host (`--resolve`): a workload that
/// never asked for `local.test` gets neither its rules (the connect goes
/// to the sandbox's own loopback, where nothing listens) nor its name in
/// the deny log.
#[test]
fn a_bare_address_is_not_attributed_to_a_name_the_workload_never_asked_for() {
    let s = setup();
    for port in [s.port, s.port.wrapping_add(1)] {
        let code = py_connect("AF_INET", "127.0.0.1", port);
        let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
        assert!(
            stdout(&out).starts_with("111 "),
            "{} {}",
            stdout(&out),
            stderr(&out)
        );
        for line in &log {
            assert!(!line.to_string().contains("local.test"), "{line}");
        }
    }
}

/// The sandbox's loopback is its own: a connect no rule allows to a bare
/// loopback address reaches a server the workload runs there (bound by
/// `listen`, as Landlock refuses it `bind`), and nothing
/// of the host's. Where nothing listens, the refusal is logged: what the
/// workload aimed at may be the host's loopback.
#[test]
fn a_bare_loopback_connect_reaches_only_the_sandboxs_own_and_a_refusal_is_logged() {
    let s = setup();
    let trap = s.net.trap_tcp("127.0.0.1:0");
    let host_port = trap.local_addr().unwrap().port();
    let code = format!(
        "import socket\nsrv=socket.socket(); srv.listen(1)\nown=srv.getsockname()[1]\nfor p in ({host_port}, own):\n  s=socket.socket()\n  try:\n    s.connect(('127.0.0.1',p)); print('connected', p==own)\n  except OSError as e:\n    print(e.errno)\n"
    );
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert_eq!(stdout(&out), "111\nconnected True\n", "{}", stderr(&out));
    assert!(
        matches!(trap.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the host's listener was reached"
    );
    let denied: Vec<_> = log.iter().filter(|l| l["action"] == "Denied").collect();
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(denied[0]["dst_endpoint"]["ip"], "127.0.0.1");
    assert_eq!(denied[0]["dst_endpoint"]["port"], u64::from(host_port));
}
