//! Connection brokering against the real kernel: each test is a workload
//! (curl, python3, bash) that must reach an allowed server or must fail.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use common::{Dir, SYSTEM, TestNet, bundle, clients, log_lines, output, stderr, stdout};

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
        let log = self.dir.join("deny.log");
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

#[test]
fn a_disallowed_port_is_refused_at_once_and_logged() {
    let s = setup();
    let other = s.port.wrapping_add(1);
    let code = py_connect("AF_INET", "local.test", other);
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
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
    assert_eq!(
        line["actor"]["process"]["file"]["path"],
        common::exe("/usr/bin/python3")
    );
    assert_eq!(line["firewall_rule"]["name"], "default");
    assert!(line["message"].as_str().unwrap().contains("no rule allows"));
}

#[test]
fn the_ipv4_mapped_ipv6_form_of_a_refused_address_is_refused_too() {
    let s = setup();
    let other = s.port.wrapping_add(1);
    let code = py_connect("AF_INET6", "::ffff:127.0.0.1", other);
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert!(
        stdout(&out).starts_with("111 "),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["dst_endpoint"]["ip"], "127.0.0.1", "decided as IPv4");
    // The allowed port through the mapped form is the same decision: allowed.
    let code = py_connect("AF_INET6", "::ffff:127.0.0.1", s.port);
    let (out, _) = s.run(&["/usr/bin/python3", "-c", &code]);
    assert_eq!(stdout(&out).trim(), "0 0", "{}", stderr(&out));
}

#[test]
fn a_copy_of_an_allowed_binary_at_another_path_is_refused() {
    let s = setup();
    let bin = s.dir.mkdir("bin");
    let copy = bin.join("curl");
    std::fs::copy("/usr/bin/curl", &copy).unwrap();
    // The copy may run (its directory is executable), but it is not named.
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs exec {}\n  run_as user nobody group nogroup\n  binaries clients = {}\n  allow clients -> local.test:{}\n",
        bin.display(),
        clients(),
        s.port
    );
    let bundle = bundle(&s.dir, "copy", &body);
    let log = s.dir.join("copy.log");
    let url = format!("http://local.test:{}/", s.port);
    let out = output(s.net.supervisor(
        &[
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            s.dir.path().to_str().unwrap(),
            "--resolve",
            "local.test=127.0.0.1",
            "--log",
            log.to_str().unwrap(),
            "--",
            copy.to_str().unwrap(),
            "-sS",
            &url,
        ],
        None,
    ));
    assert_eq!(
        out.status.code(),
        Some(7),
        "curl: couldn't connect; {}",
        stderr(&out)
    );
    let log = log_lines(&log);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        log[0]["actor"]["process"]["file"]["path"],
        copy.to_str().unwrap()
    );
    assert!(
        log[0]["message"]
            .as_str()
            .unwrap()
            .contains("no rule names the binary")
    );
}

#[test]
fn metadata_and_link_local_addresses_are_refused() {
    let s = setup();
    s.net.host("169.254.169.254/32");
    s.net.host("fe80::1/64");
    let metadata = s.net.trap_tcp("169.254.169.254:80");
    let code = format!(
        "{}{}",
        py_connect("AF_INET", "169.254.169.254", 80),
        py_connect("AF_INET6", "fe80::1", 80).replace("import socket,time,errno\n", "")
    );
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{} {}", stdout(&out), stderr(&out));
    for line in lines {
        assert!(line.starts_with("111 "), "{line}");
    }
    let ips: Vec<&str> = log
        .iter()
        .map(|l| l["dst_endpoint"]["ip"].as_str().unwrap())
        .collect();
    assert_eq!(ips, ["169.254.169.254", "fe80::1"]);
    let reached = metadata.accept();
    assert!(
        matches!(&reached, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the metadata stand-in was reached: {reached:?}"
    );
}

#[test]
fn bash_dev_tcp_reaches_an_allowed_server_and_sees_a_blocking_socket_work() {
    let s = setup();
    let script = format!(
        "exec 3<>/dev/tcp/local.test/{} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && tail -c 2 <&3",
        s.port
    );
    let (out, log) = s.run(&["/usr/bin/bash", "-c", &script]);
    assert_eq!(stdout(&out), "ok", "{}", stderr(&out));
    assert!(log.is_empty(), "{log:?}");
}

/// A credential bound to the host closes the plain L4 rule to it: the
/// workload's connect is refused and logged (OpenShell's supervisor
/// refuses such a CONNECT too), and `uninspected_credentials` opens it.
#[test]
fn an_l4_rule_to_a_credentialed_host_is_refused_at_connect() {
    let rules = |flag: &'static str| {
        move |dir: &Dir, port: u16| {
            let secret = dir.join("secret");
            std::fs::write(&secret, "real-secret").unwrap();
            format!(
                "  credential key {{\n    secret file {}\n    inject header X-Api-Key \"{{secret}}\"\n    hosts local.test\n  }}\n  allow clients -> local.test:{port} {flag}\n",
                secret.display()
            )
        }
    };
    let s = setup_with(rules(""));
    let code = py_connect("AF_INET", "local.test", s.port);
    let (out, log) = s.run(&["/usr/bin/python3", "-c", &code]);
    let printed = stdout(&out);
    assert_eq!(
        printed.split_whitespace().next(),
        Some("111"),
        "ECONNREFUSED: {printed} {}",
        stderr(&out)
    );
    let denied: Vec<_> = log.iter().filter(|l| l["action"] == "Denied").collect();
    assert_eq!(denied.len(), 1, "{log:?}");
    let message = denied[0]["message"].as_str().unwrap();
    assert!(
        message.contains("credential `key`") && message.contains("uninspected_credentials"),
        "{message}"
    );

    let s = setup_with(rules("uninspected_credentials"));
    let url = format!("http://local.test:{}/", s.port);
    let (out, _) = s.run(&["/usr/bin/curl", "-sS", "--max-time", "10", &url]);
    assert_eq!(stdout(&out), "ok", "{}", stderr(&out));
}
