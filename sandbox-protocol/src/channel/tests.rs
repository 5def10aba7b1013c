use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::ResolvesClientCert;
use rustls::pki_types::ServerName;
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::Binding;

fn binding(generation: u64) -> Binding {
    Binding {
        sandbox_id: "sb-7".into(),
        generation,
    }
}

/// A listener on loopback whose first connection `end` handshakes: the
/// address, and what the handshake gave.
async fn sandbox(
    end: SandboxEnd,
) -> (
    SocketAddr,
    tokio::task::JoinHandle<Result<SandboxStream, ChannelError>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        end.handshake(tcp).await
    });
    (addr, task)
}

fn refusal(r: Result<impl Sized, ChannelError>) -> String {
    match r {
        Ok(_) => panic!("the peer was let in"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_supervisor_of_the_generation_attaches_and_bytes_cross_both_ways() {
    let (sb, sup) = issue(&binding(1)).unwrap();
    let (addr, accepted) = sandbox(SandboxEnd::new(&sb).unwrap()).await;
    let mut client = SupervisorEnd::new(&sup)
        .unwrap()
        .connect(addr)
        .await
        .unwrap();
    let mut server = accepted.await.unwrap().unwrap();
    assert_eq!(server.get_ref().1.alpn_protocol(), Some(ALPN));
    assert_eq!(
        server.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    client.write_all(b"up").await.unwrap();
    let mut got = [0_u8; 2];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"up");
    server.write_all(b"down").await.unwrap();
    let mut got = [0_u8; 4];
    client.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"down");
}

#[tokio::test]
async fn each_end_refuses_a_peer_of_another_generation() {
    let (sb_old, sup_old) = issue(&binding(1)).unwrap();
    let (sb_new, sup_new) = issue(&binding(2)).unwrap();

    // The old supervisor does not trust the new sandbox's certificate.
    let (addr, accepted) = sandbox(SandboxEnd::new(&sb_new).unwrap()).await;
    let refused = refusal(SupervisorEnd::new(&sup_old).unwrap().connect(addr).await);
    assert!(
        refused.contains("not of this sandbox's generation"),
        "{refused}"
    );
    assert!(accepted.await.unwrap().is_err());

    // A supervisor that trusts the new sandbox but presents the old
    // generation's certificate and key is refused by the sandbox.
    let mixed = Credential {
        ca: sup_new.ca.clone(),
        ..sup_old.clone()
    };
    let (addr, accepted) = sandbox(SandboxEnd::new(&sb_new).unwrap()).await;
    let attempt = SupervisorEnd::new(&mixed).unwrap().connect(addr).await;
    let refused = refusal(accepted.await.unwrap());
    assert!(
        refused.contains("not of this sandbox's generation"),
        "{refused}"
    );
    // TLS 1.3: the client may finish its side before the refusal arrives;
    // the first read then fails.
    if let Ok(mut tls) = attempt {
        let mut byte = [0_u8; 1];
        assert!(!matches!(tls.read(&mut byte).await, Ok(n) if n > 0));
    }

    // The old sandbox end refuses the new supervisor likewise.
    let (addr, accepted) = sandbox(SandboxEnd::new(&sb_old).unwrap()).await;
    assert!(
        SupervisorEnd::new(&sup_new)
            .unwrap()
            .connect(addr)
            .await
            .is_err()
    );
    assert!(accepted.await.unwrap().is_err());
}

/// Presents one certificate, signs with another key.
#[derive(Debug)]
struct Replayed(Arc<CertifiedKey>);

impl ResolvesClientCert for Replayed {
    fn resolve(&self, _: &[&[u8]], _: &[rustls::SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_copied_certificate_without_its_key_is_refused() {
    let (sb, sup) = issue(&binding(3)).unwrap();
    let (_, stranger) = issue(&binding(3)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let parts = sup.parts().unwrap();
    let foreign_key = provider
        .key_provider
        .load_private_key(stranger.parts().unwrap().key)
        .unwrap();
    let copied = Arc::new(CertifiedKey::new(vec![parts.cert], foreign_key));
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots(parts.ca).unwrap())
        .with_client_cert_resolver(Arc::new(Replayed(copied)));
    let refused = refusal_of(SandboxEnd::new(&sb).unwrap(), config, ALPN).await;
    assert!(refused.contains("does not hold the key"), "{refused}");
}

#[tokio::test]
async fn garbage_a_silent_peer_and_a_peer_without_a_certificate_are_refused() {
    let (sb, sup) = issue(&binding(4)).unwrap();
    let end = SandboxEnd::new(&sb).unwrap();

    let (addr, accepted) = sandbox(end.clone()).await;
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: sandbox\r\n\r\n")
        .await
        .unwrap();
    let refused = refusal(accepted.await.unwrap());
    assert!(refused.contains("does not speak TLS 1.3"), "{refused}");

    let (addr, accepted) = sandbox(end.clone().handshake_within(Duration::from_millis(200))).await;
    let _silent = TcpStream::connect(addr).await.unwrap();
    let refused = refusal(accepted.await.unwrap());
    assert!(
        refused.contains("did not complete the TLS handshake"),
        "{refused}"
    );

    // A client that trusts the sandbox but presents no certificate.
    let parts = sup.parts().unwrap();
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots(parts.ca).unwrap())
        .with_no_client_auth();
    let refused = refusal_of(end, config, ALPN).await;
    assert!(refused.contains("no certificate"), "{refused}");
}

#[tokio::test]
async fn tls_1_2_and_another_alpn_are_refused() {
    let (sb, sup) = issue(&binding(5)).unwrap();
    let parts = sup.parts().unwrap();
    for (versions, alpn) in [
        (&[&rustls::version::TLS12][..], ALPN),
        (&[&rustls::version::TLS13][..], &b"h2"[..]),
    ] {
        let parts = sup.parts().unwrap();
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots(parts.ca).unwrap())
            .with_client_auth_cert(vec![parts.cert], parts.key)
            .unwrap();
        let refused = refusal_of(SandboxEnd::new(&sb).unwrap(), config, alpn).await;
        assert!(
            refused.contains("TLS") || refused.contains("ALPN"),
            "{refused}"
        );
    }
    drop(parts);
}

#[test]
fn credentials_round_trip_and_each_is_for_its_end_only() {
    let (sb, sup) = issue(&binding(6)).unwrap();
    let json = sb.to_json().unwrap();
    assert_eq!(Credential::from_json(&json, Role::Sandbox).unwrap(), sb);
    let wrong = Credential::from_json(&json, Role::Supervisor).unwrap_err();
    assert!(wrong.to_string().contains("for the Sandbox end"), "{wrong}");
    assert!(SandboxEnd::new(&sup).is_err());
    assert!(SupervisorEnd::new(&sb).is_err());
    assert_eq!(sup.binding(), binding(6));
    let shown = format!("{sb:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    let broken = Credential {
        key: "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n".into(),
        ..sb
    };
    let err = Credential::from_json(&broken.to_json().unwrap(), Role::Sandbox).unwrap_err();
    assert!(err.to_string().contains("key"), "{err}");
    assert!(
        issue(&Binding {
            sandbox_id: String::new(),
            generation: 1
        })
        .is_err()
    );
}

/// What a sandbox end `end` says of a peer that connects with `config`,
/// offering ALPN `alpn`.
async fn refusal_of(end: SandboxEnd, mut config: rustls::ClientConfig, alpn: &[u8]) -> String {
    config.alpn_protocols = vec![alpn.to_vec()];
    let (addr, accepted) = sandbox(end).await;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let _ = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(SERVER_NAME).unwrap(), tcp)
        .await;
    refusal(accepted.await.unwrap())
}

#[test]
fn endpoints_parse_as_ip_and_port_or_an_absolute_unix_path() {
    assert_eq!(
        "127.0.0.1:7443".parse::<Endpoint>(),
        Ok(Endpoint::Tcp("127.0.0.1:7443".parse().unwrap()))
    );
    assert_eq!(
        "unix:/run/sb/channel.sock".parse::<Endpoint>(),
        Ok(Endpoint::Unix("/run/sb/channel.sock".into()))
    );
    for (text, said) in [
        (
            "unix:run/sb.sock",
            "`unix:` needs an absolute path, not `run/sb.sock`",
        ),
        ("unix:", "`unix:` needs an absolute path, not ``"),
        (
            "localhost:7443",
            "`localhost:7443` is neither IP:PORT nor unix:/ABSOLUTE/PATH",
        ),
        (
            "/run/sb.sock",
            "`/run/sb.sock` is neither IP:PORT nor unix:/ABSOLUTE/PATH",
        ),
    ] {
        assert_eq!(text.parse::<Endpoint>().unwrap_err().to_string(), said);
    }
    let long = format!("unix:/{}", "x".repeat(MAX_UNIX_PATH));
    let err = long.parse::<Endpoint>().unwrap_err().to_string();
    assert!(err.contains("at most 107 bytes"), "{err}");
    // In JSON, as the text: an IP:PORT of an older bootstrap reads as TCP.
    for text in ["10.0.0.7:7443", "[::1]:7443", "unix:/run/sb/channel.sock"] {
        let endpoint: Endpoint = text.parse().unwrap();
        let json = serde_json::to_string(&endpoint).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<Endpoint>(&json).unwrap(), endpoint);
    }
    let err = serde_json::from_str::<Endpoint>("\"unix:x\"").unwrap_err();
    assert!(err.to_string().contains("needs an absolute path"), "{err}");
}

/// Over a Unix socket: the same handshake, the same refusal of another
/// generation; the socket is the owner's alone.
#[tokio::test]
async fn the_channel_runs_over_a_unix_socket_with_the_same_checks() {
    let dir = tempfile::tempdir().unwrap();
    let at = Endpoint::unix(dir.path().join("sock")).unwrap();
    let (sb, sup) = issue(&binding(8)).unwrap();
    let (_, stranger) = issue(&binding(7)).unwrap();
    let listener = Listener::bind(&at).await.unwrap();
    assert_eq!(listener.local().unwrap(), at);
    let meta = std::fs::symlink_metadata(dir.path().join("sock")).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert_eq!(meta.uid(), own_uid());
    let end = SandboxEnd::new(&sb).unwrap();
    let accepting = tokio::spawn(async move {
        let mut said = Vec::new();
        for _ in 0..2 {
            let (io, peer) = listener.accept().await.unwrap();
            said.push((peer.to_string(), end.handshake(io).await));
        }
        said
    });
    let refused = refusal(
        SupervisorEnd::new(&stranger)
            .unwrap()
            .connect(at.clone())
            .await,
    );
    assert!(refused.contains(&format!("at {at}")), "{refused}");
    let mut client = SupervisorEnd::new(&sup).unwrap().connect(at).await.unwrap();
    let mut said = accepting.await.unwrap();
    let (peer, accepted) = said.pop().unwrap();
    assert!(
        peer.starts_with(&format!("pid {} uid ", std::process::id())),
        "{peer}"
    );
    let mut server = accepted.unwrap();
    assert!(said.pop().unwrap().1.is_err(), "generation 7 was let in");
    client.write_all(b"up").await.unwrap();
    let mut got = [0_u8; 2];
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"up");
}

/// This process's effective uid, as the kernel reports it.
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// A socket file nothing listens on is replaced; a live socket, a file
/// or a directory at the path is left alone and refuses the bind; and a
/// supervisor finds nothing to reach until the sandbox listens.
#[tokio::test]
async fn a_stale_socket_is_replaced_and_anything_else_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sock");
    let at = Endpoint::unix(&path).unwrap();
    let (_, sup) = issue(&binding(9)).unwrap();
    let unreachable = SupervisorEnd::new(&sup).unwrap().connect(at.clone()).await;
    assert!(matches!(unreachable, Err(ChannelError::Unreachable(_))));

    let live = Listener::bind(&at).await.unwrap();
    let err = Listener::bind(&at).await.unwrap_err().to_string();
    assert!(err.contains("a socket something listens on"), "{err}");
    drop(live);
    // The file stays behind its listener: stale, and taken over.
    assert!(path.exists());
    let unreachable = SupervisorEnd::new(&sup).unwrap().connect(at.clone()).await;
    assert!(matches!(unreachable, Err(ChannelError::Unreachable(_))));
    Listener::bind(&at).await.unwrap();

    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "kept").unwrap();
    let err = Listener::bind(&at).await.unwrap_err().to_string();
    assert!(
        err.contains("is not a socket: it is left as it is"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let err = Listener::bind(&at).await.unwrap_err().to_string();
    assert!(err.contains("is not a socket"), "{err}");
}

/// A kit's halves are the two ends of one generation: the sandbox's
/// credential inside the bootstrap accepts the supervisor's credential.
#[tokio::test]
async fn a_kits_halves_attach_to_each_other_and_its_debug_shows_no_key() {
    let listen: Endpoint = "127.0.0.1:7443".parse().unwrap();
    let made = kit(&binding(4), &listen, 12).unwrap();
    let shown = format!("{made:?}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");

    let bootstrap: serde_json::Value = serde_json::from_slice(&made.bootstrap).unwrap();
    let mut fields: Vec<&str> = bootstrap
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["credential", "listen", "reattach_within", "version"]
    );
    assert_eq!(bootstrap["version"], KIT_BOOTSTRAP_VERSION);
    assert_eq!(bootstrap["listen"], "127.0.0.1:7443");
    assert_eq!(bootstrap["reattach_within"], 12);
    let sb = Credential::from_json(
        &serde_json::to_vec(&bootstrap["credential"]).unwrap(),
        Role::Sandbox,
    )
    .unwrap();
    let sup = Credential::from_json(&made.supervisor, Role::Supervisor).unwrap();
    assert_eq!(sb.binding(), binding(4));
    assert_eq!(sup.binding(), binding(4));
    assert!(Credential::from_json(&made.supervisor, Role::Sandbox).is_err());

    let (addr, accepted) = sandbox(SandboxEnd::new(&sb).unwrap()).await;
    SupervisorEnd::new(&sup)
        .unwrap()
        .connect(addr)
        .await
        .unwrap();
    accepted.await.unwrap().unwrap();
}

#[test]
fn a_kit_refuses_a_sandbox_id_no_credential_can_carry() {
    let listen: Endpoint = "127.0.0.1:7443".parse().unwrap();
    let empty = Binding {
        sandbox_id: String::new(),
        generation: 1,
    };
    assert!(kit(&empty, &listen, 30).is_err());
}
