//! The sandbox protocol between two processes over TCP and TLS 1.3 on
//! loopback, as two hosts are joined (`sandbox_protocol::channel`): this
//! test is the supervisor's end; its sandbox's end is this test program
//! again, run as `channel_sandbox_end` in a process of its own, holding
//! only the sandbox's credential.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests stop at the first failure"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sandbox_protocol::channel::{Credential, Role, SandboxEnd, SupervisorEnd, issue};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{Binding, Caller};

/// Where the sandbox end finds its credential, the upstream to relay to,
/// the digest it says it enforces, and where it writes its port.
const CREDENTIAL: &str = "CHANNEL_TEST_CREDENTIAL";
const UPSTREAM: &str = "CHANNEL_TEST_UPSTREAM";
const DIGEST: &str = "CHANNEL_TEST_DIGEST";
const PORT_FILE: &str = "CHANNEL_TEST_PORT_FILE";

fn binding() -> Binding {
    Binding {
        sandbox_id: "two-process".into(),
        generation: 9,
    }
}

/// The sandbox's end, in the process the test starts: listens, accepts
/// one supervisor of its generation, attaches, asks for a relayed connect
/// to the upstream and exchanges a line over it.
fn sandbox_end(credential: &str) {
    let credential =
        Credential::from_json(&std::fs::read(credential).unwrap(), Role::Sandbox).unwrap();
    let upstream: SocketAddr = std::env::var(UPSTREAM).unwrap().parse().unwrap();
    let digest = std::env::var(DIGEST).unwrap();
    let port_file = PathBuf::from(std::env::var(PORT_FILE).unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let end = SandboxEnd::new(&credential).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        std::fs::write(port_file.with_extension("tmp"), port.to_string()).unwrap();
        std::fs::rename(port_file.with_extension("tmp"), &port_file).unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let tls = end.handshake(tcp).await.unwrap();
        let supervisor = sandbox::relay::Supervisor::attach(
            tls,
            Link::Network,
            credential.binding(),
            Some(digest),
        )
        .await
        .unwrap();
        let caller = Caller {
            pid: 2,
            tid: 2,
            exe: b"/usr/bin/curl".to_vec(),
            exe_deleted: false,
            exe_sha256: None,
            foreign_code: None,
            writable_tree: None,
        };
        let answer = supervisor.connect(caller, upstream).await.unwrap();
        let sandbox::relay::Connect::Relayed(mut stream) = answer else {
            panic!("not relayed: {answer:?}");
        };
        tokio::task::spawn_blocking(move || {
            stream.write_all(b"ping\n").unwrap();
            let mut got = [0_u8; 5];
            stream.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"pong\n");
        })
        .await
        .unwrap();
    });
    println!("relayed");
}

fn wait_for(path: &Path) -> String {
    let start = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the sandbox's end never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_relay_crosses_tcp_and_tls_between_two_processes() {
    if let Ok(credential) = std::env::var(CREDENTIAL) {
        return sandbox_end(&credential);
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_addr = upstream.local_addr().unwrap();
    let served = std::thread::spawn(move || {
        let (mut conn, _) = upstream.accept().unwrap();
        let mut got = [0_u8; 5];
        conn.read_exact(&mut got).unwrap();
        conn.write_all(b"pong\n").unwrap();
        got
    });
    let policy = dir.path().join("t.policy");
    std::fs::write(
        &policy,
        format!(
            "policy \"t\" {{\n  allow /usr/bin/curl -> 127.0.0.1:{}\n}}\n",
            upstream_addr.port()
        ),
    )
    .unwrap();
    let (_, bundle) = policy_lang::load::compile_file(&policy, None).unwrap();
    let bundle = bundle.unwrap();
    let (sandbox_cred, supervisor_cred) = issue(&binding()).unwrap();
    let cred_path = dir.path().join("sandbox.json");
    std::fs::write(&cred_path, sandbox_cred.to_json().unwrap()).unwrap();
    let port_file = dir.path().join("port");
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_relay_crosses_tcp_and_tls_between_two_processes",
            "--nocapture",
        ])
        .env(CREDENTIAL, &cred_path)
        .env(UPSTREAM, upstream_addr.to_string())
        .env(DIGEST, &bundle.digest)
        .env(PORT_FILE, &port_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port: u16 = wait_for(&port_file).trim().parse().unwrap();
    let log = dir.path().join("deny.log");
    let (side, _) = supervisor::relay::bundle_side(bundle, &log, &[], binding()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let tls = SupervisorEnd::new(&supervisor_cred)
            .unwrap()
            .connect(SocketAddr::from(([127, 0, 0, 1], port)))
            .await
            .unwrap();
        // Served until the sandbox's end goes.
        let _ = sandbox_protocol::transport::serve(side, tls, Link::Network).await;
    });
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("relayed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&served.join().unwrap(), b"ping\n");
}
