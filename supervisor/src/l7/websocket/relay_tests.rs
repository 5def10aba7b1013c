use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};

use super::*;
use crate::l7::websocket::frame::{OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_TEXT, encode};

fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = encode(opcode, payload, Some([9, 8, 7, 6]));
    if !fin {
        f[0] &= 0x7f;
    }
    f
}

/// One frame: opcode, masked or not, payload unmasked.
async fn read_frame(r: &mut DuplexStream) -> Option<(u8, bool, Vec<u8>)> {
    let mut head = vec![0_u8; 2];
    r.read_exact(&mut head).await.ok()?;
    loop {
        if let Some((header_len, len)) = frame::server_frame_len(&head) {
            let masked = head[1] & 0x80 != 0;
            let mut payload = vec![0_u8; len as usize];
            r.read_exact(&mut payload).await.ok()?;
            if masked {
                let key: [u8; 4] = head[header_len - 4..header_len].try_into().ok()?;
                frame::apply_mask(&mut payload, key);
            }
            return Some((head[0] & 0x0f, masked, payload));
        }
        let mut b = [0_u8; 1];
        r.read_exact(&mut b).await.ok()?;
        head.push(b[0]);
    }
}

fn close_code(payload: &[u8]) -> u16 {
    u16::from_be_bytes([payload[0], payload[1]])
}

/// Denies text containing `deny`, replaces `PH` with a longer secret,
/// allows the rest.
fn judge(m: Message<'_>) -> Judged {
    match m {
        Message::Text(t) if t.contains("deny") => Judged::Deny(format!("`{t}` denied")),
        Message::Text(t) if t.contains("PH") => Judged::Replace(t.replace("PH", &"S".repeat(200))),
        _ => Judged::Forward,
    }
}

struct Harness {
    client: DuplexStream,
    server: DuplexStream,
    relay: tokio::task::JoinHandle<End>,
    revoke: Option<tokio::sync::oneshot::Sender<()>>,
}

fn start(limits: Limits) -> Harness {
    start_with(limits, None)
}

const SECRET: &[u8] = b"sk-live-0123456789abcdef";

/// A relay after an upgrade that carried `SECRET`.
fn start_scrubbing(limit: usize) -> Harness {
    let scrub = Scrubbing {
        secrets: vec![(
            crate::l7::forms::SecretForms::new(SECRET),
            b"PLACEHOLDER".to_vec(),
        )],
        limit,
    };
    start_with(limits(), Some(scrub))
}

fn unmasked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = encode(opcode, payload, None);
    if !fin {
        f[0] &= 0x7f;
    }
    f
}

fn start_with(limits: Limits, scrub: Option<Scrubbing>) -> Harness {
    let (client, proxy_client) = duplex(1 << 20);
    let (proxy_server, server) = duplex(1 << 20);
    let (revoke, revoked) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(relay(
        proxy_client,
        proxy_server,
        judge,
        limits,
        scrub,
        async {
            if revoked.await.is_err() {
                std::future::pending::<()>().await;
            }
        },
    ));
    Harness {
        client,
        server,
        relay,
        revoke: Some(revoke),
    }
}

fn limits() -> Limits {
    Limits::new(64)
}

/// The client sees a close with `code`, the server one too and nothing
/// else, and the relay ends as `end`.
async fn closed_with(mut h: Harness, code: u16) -> End {
    let (op, masked, payload) = read_frame(&mut h.client).await.unwrap();
    assert_eq!((op, masked), (OP_CLOSE, false));
    assert_eq!(close_code(&payload), code);
    let (op, masked, payload) = read_frame(&mut h.server).await.unwrap();
    assert_eq!(
        (op, masked),
        (OP_CLOSE, true),
        "the server got something before the close"
    );
    assert_eq!(close_code(&payload), code);
    drop(h.server);
    h.relay.await.unwrap()
}

#[tokio::test]
async fn an_allowed_message_goes_up_masked_and_the_answer_comes_back() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(true, OP_TEXT, b"hello"))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.server).await,
        Some((OP_TEXT, true, b"hello".to_vec()))
    );
    h.server
        .write_all(&encode(OP_TEXT, b"echo", None))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_TEXT, false, b"echo".to_vec()))
    );
    h.client
        .write_all(&masked(true, OP_BINARY, &[0, 1, 2]))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.server).await,
        Some((OP_BINARY, true, vec![0, 1, 2]))
    );
}

#[tokio::test]
async fn a_denied_message_never_reaches_the_server() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(true, OP_TEXT, b"please deny"))
        .await
        .unwrap();
    let end = closed_with(h, close::POLICY_VIOLATION).await;
    assert_eq!(end, End::Denied("`please deny` denied".into()));
}

#[tokio::test]
async fn fragments_are_judged_as_one_message_and_controls_pass_between_them() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(false, OP_TEXT, b"harmless "))
        .await
        .unwrap();
    h.client
        .write_all(&masked(true, OP_PING, b"p"))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.server).await,
        Some((OP_PING, true, b"p".to_vec()))
    );
    h.client
        .write_all(&masked(true, OP_CONTINUATION, b"then deny"))
        .await
        .unwrap();
    let end = closed_with(h, close::POLICY_VIOLATION).await;
    assert_eq!(end, End::Denied("`harmless then deny` denied".into()));
}

#[tokio::test]
async fn an_allowed_fragmented_message_goes_up_whole() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(false, OP_TEXT, b"he"))
        .await
        .unwrap();
    h.client
        .write_all(&masked(false, OP_CONTINUATION, b"ll"))
        .await
        .unwrap();
    h.client
        .write_all(&masked(true, OP_CONTINUATION, b"o"))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.server).await,
        Some((OP_TEXT, true, b"hello".to_vec()))
    );
}

#[tokio::test]
async fn protocol_errors_close_with_1002() {
    let mut rsv = masked(true, OP_TEXT, b"x");
    rsv[0] |= 0x40;
    let cases = [
        encode(OP_TEXT, b"unmasked", None),
        rsv,
        masked(true, OP_CONTINUATION, b"orphan"),
        [masked(false, OP_TEXT, b"a"), masked(true, OP_TEXT, b"b")].concat(),
    ];
    for bytes in cases {
        let mut h = start(limits());
        h.client.write_all(&bytes).await.unwrap();
        assert!(matches!(
            closed_with(h, close::PROTOCOL_ERROR).await,
            End::Violation(_)
        ));
    }
}

#[tokio::test]
async fn a_message_over_the_limit_closes_with_1009_before_its_payload_arrives() {
    let mut h = start(limits());
    let f = masked(true, OP_TEXT, &[b'a'; 65]);
    h.client.write_all(&f[..8]).await.unwrap();
    assert!(matches!(
        closed_with(h, close::MESSAGE_TOO_BIG).await,
        End::Violation(_)
    ));
    // Exactly the limit, in two fragments, passes.
    let mut h = start(limits());
    h.client
        .write_all(&masked(false, OP_TEXT, &[b'a'; 32]))
        .await
        .unwrap();
    h.client
        .write_all(&masked(true, OP_CONTINUATION, &[b'a'; 32]))
        .await
        .unwrap();
    assert_eq!(read_frame(&mut h.server).await.unwrap().2.len(), 64);
    h.client
        .write_all(&masked(false, OP_TEXT, &[b'a'; 32]))
        .await
        .unwrap();
    h.client
        .write_all(&masked(true, OP_CONTINUATION, &[b'a'; 33]))
        .await
        .unwrap();
    assert!(matches!(
        closed_with(h, close::MESSAGE_TOO_BIG).await,
        End::Violation(_)
    ));
}

#[tokio::test]
async fn text_that_is_not_utf8_closes_with_1007() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(true, OP_TEXT, &[0x61, 0xff]))
        .await
        .unwrap();
    assert!(matches!(
        closed_with(h, close::INVALID_PAYLOAD).await,
        End::Violation(_)
    ));
}

#[tokio::test]
async fn a_message_trickling_in_is_closed_with_1002() {
    let mut h = start(Limits {
        message_limit: 64,
        idle: Duration::from_millis(50),
        total: Duration::from_millis(200),
    });
    h.client
        .write_all(&masked(false, OP_TEXT, b"a"))
        .await
        .unwrap();
    assert!(matches!(
        closed_with(h, close::PROTOCOL_ERROR).await,
        End::Violation(_)
    ));
}

#[tokio::test]
async fn a_revoked_connection_closes_with_1012() {
    let mut h = start(limits());
    h.revoke.take().unwrap().send(()).unwrap();
    assert!(matches!(
        closed_with(h, close::SERVICE_RESTART).await,
        End::Revoked(_)
    ));
}

#[tokio::test]
async fn the_proxys_close_waits_for_the_end_of_a_server_frame() {
    let mut h = start(limits());
    let big = encode(OP_BINARY, &[7; 1000], None);
    h.server.write_all(&big[..500]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    h.client
        .write_all(&masked(true, OP_TEXT, b"deny"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    h.server.write_all(&big[500..]).await.unwrap();
    h.server
        .write_all(&encode(OP_TEXT, b"dropped", None))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_BINARY, false, vec![7; 1000]))
    );
    let (op, _, payload) = read_frame(&mut h.client).await.unwrap();
    assert_eq!(
        (op, close_code(&payload)),
        (OP_CLOSE, close::POLICY_VIOLATION)
    );
    assert_eq!(read_frame(&mut h.client).await, None);
}

#[tokio::test]
async fn the_close_handshake_passes_both_ways() {
    let mut h = start(limits());
    h.server
        .write_all(&encode(OP_CLOSE, &frame::close_payload(1000, "bye"), None))
        .await
        .unwrap();
    let (op, _, payload) = read_frame(&mut h.client).await.unwrap();
    assert_eq!((op, close_code(&payload)), (OP_CLOSE, 1000));
    h.client
        .write_all(&masked(true, OP_CLOSE, &frame::close_payload(1000, "")))
        .await
        .unwrap();
    let (op, masked, payload) = read_frame(&mut h.server).await.unwrap();
    assert_eq!((op, masked, close_code(&payload)), (OP_CLOSE, true, 1000));
    drop(h.server);
    assert_eq!(h.relay.await.unwrap(), End::ClientClosed);
}

#[tokio::test]
async fn after_a_credentialed_upgrade_the_servers_messages_reach_the_client_scrubbed() {
    let mut h = start_scrubbing(1024);
    let echoed = [b"token=".as_slice(), SECRET, b";"].concat();
    // Split inside the secret, a ping between the fragments.
    h.server
        .write_all(&unmasked(false, OP_TEXT, &echoed[..10]))
        .await
        .unwrap();
    h.server
        .write_all(&unmasked(true, OP_PING, SECRET))
        .await
        .unwrap();
    h.server
        .write_all(&unmasked(true, OP_CONTINUATION, &echoed[10..]))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_PING, false, b"PLACEHOLDER".to_vec()))
    );
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_TEXT, false, b"token=PLACEHOLDER;".to_vec()))
    );
    // A binary message holding the secret hex-encoded, one without it
    // unchanged.
    let hex: String = SECRET.iter().map(|b| format!("{b:02x}")).collect();
    h.server
        .write_all(&unmasked(true, OP_BINARY, hex.as_bytes()))
        .await
        .unwrap();
    h.server
        .write_all(&unmasked(true, OP_BINARY, &[0, 1, 2]))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_BINARY, false, b"PLACEHOLDER".to_vec()))
    );
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_BINARY, false, vec![0, 1, 2]))
    );
    // A close whose reason holds the secret keeps only its code.
    let mut close = 4000_u16.to_be_bytes().to_vec();
    close.extend_from_slice(SECRET);
    h.server
        .write_all(&unmasked(true, OP_CLOSE, &close))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_CLOSE, false, 4000_u16.to_be_bytes().to_vec()))
    );
}

#[tokio::test]
async fn a_server_message_too_large_to_scrub_or_a_masked_frame_ends_the_connection() {
    let mut h = start_scrubbing(16);
    h.server
        .write_all(&unmasked(false, OP_TEXT, &[b'a'; 10]))
        .await
        .unwrap();
    h.server
        .write_all(&unmasked(true, OP_CONTINUATION, &[b'a'; 7]))
        .await
        .unwrap();
    let (op, _, payload) = read_frame(&mut h.client).await.unwrap();
    assert_eq!(
        (op, close_code(&payload)),
        (OP_CLOSE, close::MESSAGE_TOO_BIG)
    );
    assert_eq!(read_frame(&mut h.client).await, None);

    let mut h = start_scrubbing(1024);
    h.server
        .write_all(&encode(OP_TEXT, SECRET, Some([1, 2, 3, 4])))
        .await
        .unwrap();
    let (op, _, payload) = read_frame(&mut h.client).await.unwrap();
    assert_eq!(
        (op, close_code(&payload)),
        (OP_CLOSE, close::PROTOCOL_ERROR)
    );
    assert_eq!(read_frame(&mut h.client).await, None);
}

#[tokio::test]
async fn while_scrubbing_the_proxys_close_still_reaches_both_sides() {
    let mut h = start_scrubbing(1024);
    h.server
        .write_all(&unmasked(true, OP_TEXT, b"before"))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut h.client).await,
        Some((OP_TEXT, false, b"before".to_vec()))
    );
    h.client
        .write_all(&masked(true, OP_TEXT, b"deny"))
        .await
        .unwrap();
    let end = closed_with(h, close::POLICY_VIOLATION).await;
    assert_eq!(end, End::Denied("`deny` denied".into()));
}

/// A server message: text or binary, the secret in one of its forms
/// between two fillers, cut into fragments at these lengths.
#[derive(Debug, Clone)]
struct Echo {
    text: bool,
    before: String,
    form: usize,
    after: String,
    cuts: Vec<usize>,
    ping_between: bool,
}

fn secret_form(form: usize) -> String {
    use base64::Engine as _;
    match form {
        0 => String::from_utf8_lossy(SECRET).into_owned(),
        1 => SECRET.iter().map(|b| format!("{b:02x}")).collect(),
        _ => base64::engine::general_purpose::STANDARD.encode(SECRET),
    }
}

/// The server's frames for `e`: fragments at `cuts`, a ping holding the
/// secret after the first fragment when `ping_between` and there are
/// several (then `true`).
fn server_frames(e: &Echo) -> (Vec<u8>, bool) {
    let body = format!("{}{}{}", e.before, secret_form(e.form), e.after).into_bytes();
    let mut pieces = Vec::new();
    let mut rest = body.as_slice();
    for &cut in &e.cuts {
        if cut >= rest.len() {
            break;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    let last = pieces.len() - 1;
    let mut out = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        let opcode = match (i, e.text) {
            (0, true) => OP_TEXT,
            (0, false) => OP_BINARY,
            _ => OP_CONTINUATION,
        };
        out.extend(unmasked(i == last, opcode, piece));
        if i == 0 && last > 0 && e.ping_between {
            out.extend(unmasked(true, OP_PING, SECRET));
        }
    }
    (out, last > 0 && e.ping_between)
}

/// No form the test knows of the secret, written independently of
/// `SecretForms`: raw, hex in either case, base64 without its last,
/// neighbour-dependent characters.
fn holds_secret(payload: &[u8]) -> bool {
    let text = String::from_utf8_lossy(payload).to_ascii_lowercase();
    let b64 = secret_form(2);
    let core = &b64[1..b64.len() - 2];
    text.contains(&secret_form(0).to_ascii_lowercase())
        || text.contains(&secret_form(1))
        || String::from_utf8_lossy(payload).contains(core)
}

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn no_form_of_the_secret_reaches_the_client(
        echoes in proptest::collection::vec(
            (
                proptest::bool::ANY,
                "[g-z ]{0,30}",
                0usize..3,
                "[g-z ]{0,30}",
                proptest::collection::vec(1usize..24, 0..5),
                proptest::bool::ANY,
            )
                .prop_map(|(text, before, form, after, cuts, ping_between)| Echo {
                    text,
                    before,
                    form,
                    after,
                    cuts,
                    ping_between,
                }),
            1..5,
        ),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut h = start_scrubbing(1024);
            let mut pinged = Vec::new();
            for e in &echoes {
                let (frames, ping) = server_frames(e);
                h.server.write_all(&frames).await.unwrap();
                pinged.push(ping);
            }
            for (e, ping) in echoes.iter().zip(pinged) {
                if ping {
                    let (op, _, payload) = read_frame(&mut h.client).await.unwrap();
                    prop_assert_eq!(op, OP_PING);
                    prop_assert!(!holds_secret(&payload));
                }
                let (op, masked, payload) = read_frame(&mut h.client).await.unwrap();
                prop_assert!(!masked);
                prop_assert_eq!(op, if e.text { OP_TEXT } else { OP_BINARY });
                prop_assert!(!holds_secret(&payload), "{:?}", String::from_utf8_lossy(&payload));
                if e.form < 2 {
                    let want = format!("{}PLACEHOLDER{}", e.before, e.after);
                    prop_assert_eq!(String::from_utf8_lossy(&payload), want);
                }
            }
            Ok(())
        })?;
    }
}

/// A message whose placeholder the judge replaced goes up as one frame of
/// the replaced text, whatever its fragments were: its length (here past
/// the 125 bytes of a one-byte length) and a fresh mask are the new text's.
#[tokio::test]
async fn a_replaced_message_goes_up_as_one_frame_of_the_new_text() {
    let mut h = start(limits());
    h.client
        .write_all(&masked(false, OP_TEXT, b"a P"))
        .await
        .unwrap();
    h.client
        .write_all(&masked(true, OP_CONTINUATION, b"H b"))
        .await
        .unwrap();
    let want = format!("a {} b", "S".repeat(200));
    assert_eq!(
        read_frame(&mut h.server).await,
        Some((OP_TEXT, true, want.into_bytes()))
    );
}
