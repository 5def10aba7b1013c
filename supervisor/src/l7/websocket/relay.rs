//! The upgraded connection, both ways.
//!
//! Client → server: frames are read whole and checked ([`frame`]), the
//! fragments of a data message are joined up to the endpoint's limit, and
//! the complete message is judged; only then does it go upstream, as one
//! frame masked afresh, so the server gets exactly the bytes judged and no
//! fragment of a message leaves before all of it is allowed. Ping, pong
//! and close frames are relayed as they come, also between fragments.
//!
//! A text message whose placeholders the judge replaced goes upstream the
//! same way, as the replaced text in one frame (its own length, a fresh
//! mask), and only there.
//!
//! Server → client: bytes relayed unjudged; the frames are only measured,
//! so that a close the proxy sends the client lands between two of them.
//! After an upgrade that carried a secret, or on a connection whose
//! messages may have secrets put in them, every server message is read
//! whole and scrubbed of them instead ([`super::scrubbed`]).
//!
//! The proxy ends the connection itself with a close frame to both sides:
//! 1002 for a frame it will not read (unmasked, reserved bits or opcode,
//! a bad control frame or continuation, a message taking too long to
//! arrive), 1007 for text that is not UTF-8, 1008 for a denied message,
//! 1009 for a message over the limit, 1012 when a reloaded policy no
//! longer allows the connection.

use std::future::Future;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::frame::{
    self, Header, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT, Violation, close,
};
use super::injected;
use super::scrubbed::{self, Scrubbing};

/// A message begun must be complete within these: a client cannot hold
/// the proxy's buffer open by trickling fragments (as OpenShell).
pub(in crate::l7) const ASSEMBLY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
pub(in crate::l7) const ASSEMBLY_TOTAL_TIMEOUT: Duration = Duration::from_secs(120);
/// Fragments one message may have (as OpenShell).
const MAX_FRAGMENTS: usize = 4096;
/// How long a side has to finish the close handshake once the proxy or
/// the client started it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How long the client may take to end its side once the relay is done.
const LINGER: Duration = Duration::from_secs(2);

/// One complete client message: fragments joined, unmasked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::l7) enum Message<'a> {
    Text(&'a str),
    Binary(&'a [u8]),
}

/// What the judge says about a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::l7) enum Judged {
    /// Allowed, or audited (the judge logged it): forwarded.
    Forward,
    /// Allowed with credential placeholders replaced by their secrets:
    /// this text goes upstream in place of the message. It holds a secret,
    /// so it goes nowhere else.
    Replace(String),
    /// Denied (the judge logged it): the connection is closed with 1008.
    Deny(String),
    /// The policy in force no longer allows the connection: closed with 1012.
    Revoked(String),
}

/// Judges one complete client message.
pub(in crate::l7) trait Judge {
    fn judge(&mut self, message: Message<'_>) -> Judged;
}

impl<F: FnMut(Message<'_>) -> Judged> Judge for F {
    fn judge(&mut self, message: Message<'_>) -> Judged {
        self(message)
    }
}

/// How a relay ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::l7) enum End {
    /// The client sent a close frame (forwarded).
    ClientClosed,
    /// The client's connection ended without one.
    ClientGone,
    /// The server's connection ended.
    ServerGone,
    Violation(Violation),
    Denied(String),
    Revoked(String),
}

impl End {
    /// The close the proxy sends both sides, if it ends the connection.
    fn close(&self) -> Option<(u16, &str)> {
        match self {
            Self::ClientClosed | Self::ClientGone | Self::ServerGone => None,
            Self::Violation(v) => Some((v.code, &v.reason)),
            Self::Denied(_) => Some((close::POLICY_VIOLATION, "message denied by policy")),
            Self::Revoked(_) => Some((
                close::SERVICE_RESTART,
                "the policy was reloaded and no longer allows this connection",
            )),
        }
    }
}

/// The relay's limits.
#[derive(Debug, Clone, Copy)]
pub(in crate::l7) struct Limits {
    /// The largest complete client message judged; over it, 1009.
    pub message_limit: usize,
    pub idle: Duration,
    pub total: Duration,
}

impl Limits {
    pub fn new(message_limit: usize) -> Self {
        Self {
            message_limit,
            idle: ASSEMBLY_IDLE_TIMEOUT,
            total: ASSEMBLY_TOTAL_TIMEOUT,
        }
    }
}

/// Relays an upgraded connection until either side ends it, or the proxy
/// does. `revoked` resolves when a reload no longer allows the connection;
/// `scrub` holds the secrets the server may have been sent, if any.
pub(in crate::l7) async fn relay<C, U, J, F>(
    client: C,
    upstream: U,
    mut judge: J,
    limits: Limits,
    scrub: Option<Scrubbing>,
    revoked: F,
) -> End
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
    J: Judge,
    F: Future<Output = ()>,
{
    let (mut client_rd, client_wr) = tokio::io::split(client);
    let (upstream_rd, mut upstream_wr) = tokio::io::split(upstream);
    let (inject, injected) = oneshot::channel::<Vec<u8>>();
    let down = async {
        match scrub {
            Some(scrub) => {
                scrubbed::server_to_client(upstream_rd, client_wr, injected, scrub).await;
            }
            None => server_to_client(upstream_rd, client_wr, injected).await,
        }
    };
    let up = async {
        let end = client_to_server(
            &mut client_rd,
            &mut upstream_wr,
            &mut judge,
            &limits,
            revoked,
        )
        .await;
        if let Some((code, reason)) = end.close() {
            let payload = frame::close_payload(code, reason);
            let _ = upstream_wr
                .write_all(&frame::encode(OP_CLOSE, &payload, Some(mask_key())))
                .await;
            let _ = upstream_wr.flush().await;
            let _ = inject.send(frame::encode(OP_CLOSE, &payload, None));
        }
        if end != End::ClientClosed {
            let _ = upstream_wr.shutdown().await;
        }
        end
    };
    let end = {
        tokio::pin!(down, up);
        tokio::select! {
            end = &mut up => {
                let _ = tokio::time::timeout(CLOSE_GRACE, &mut down).await;
                end
            }
            () = &mut down => End::ServerGone,
        }
    };
    // A lingering close: the client's last bytes (its close reply, a TLS
    // alert) are read before the socket is dropped, else the kernel would
    // answer them with a reset, which can discard the close frame the
    // client has not read yet.
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0_u8; 4096];
        while matches!(client_rd.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
    end
}

/// A data message being assembled.
struct Assembly {
    opcode: u8,
    payload: Vec<u8>,
    fragments: usize,
}

/// When the bytes buffered so far must have become a whole message.
struct Deadline {
    started: Instant,
    progress: Instant,
}

async fn client_to_server<R, W, J, F>(
    client: &mut R,
    upstream: &mut W,
    judge: &mut J,
    limits: &Limits,
    revoked: F,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    J: Judge,
    F: Future<Output = ()>,
{
    tokio::pin!(revoked);
    let mut buf = BytesMut::with_capacity(8 * 1024);
    let mut message: Option<Assembly> = None;
    let mut pending: Option<Deadline> = None;
    loop {
        loop {
            let limit = limits.message_limit;
            let assembled = message.as_ref().map_or(0, |m| m.payload.len());
            let over = || format!("message over the limit of {limit} bytes");
            match frame::take_whole(&mut buf, frame::client_header, assembled, limit, over) {
                Err(v) => return End::Violation(v),
                Ok(None) => break,
                Ok(Some((h, payload))) => {
                    if let Some(end) = take_frame(h, payload, &mut message, upstream, judge).await {
                        return end;
                    }
                }
            }
        }
        let now = Instant::now();
        if buf.is_empty() && message.is_none() {
            pending = None;
        } else if pending.is_none() {
            pending = Some(Deadline {
                started: now,
                progress: now,
            });
        }
        let deadline = pending
            .as_ref()
            .map(|d| (d.progress + limits.idle).min(d.started + limits.total));
        tokio::select! {
            biased;
            () = &mut revoked => {
                return End::Revoked("the reloaded policy no longer allows this connection".into());
            }
            read = client.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return End::ClientGone,
                Ok(_) => {
                    if let Some(d) = pending.as_mut() {
                        d.progress = Instant::now();
                    }
                }
            },
            () = sleep_until(deadline) => {
                return End::Violation(Violation::protocol("the message took too long to arrive"));
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Acts on one client frame; `Some` when the relay ends.
async fn take_frame<W, J>(
    h: Header,
    payload: BytesMut,
    message: &mut Option<Assembly>,
    upstream: &mut W,
    judge: &mut J,
) -> Option<End>
where
    W: AsyncWrite + Unpin,
    J: Judge,
{
    match h.opcode {
        OP_PING | OP_PONG => send(upstream, h.opcode, &payload).await,
        OP_CLOSE => {
            if let Err(v) = frame::check_close(&payload) {
                return Some(End::Violation(v));
            }
            send(upstream, OP_CLOSE, &payload)
                .await
                .or(Some(End::ClientClosed))
        }
        OP_TEXT | OP_BINARY => {
            if message.is_some() {
                return Some(End::Violation(Violation::protocol(
                    "a new message began before the last one ended",
                )));
            }
            let started = Assembly {
                opcode: h.opcode,
                payload: payload.to_vec(),
                fragments: 1,
            };
            if h.fin {
                return complete(started, upstream, judge).await;
            }
            *message = Some(started);
            None
        }
        OP_CONTINUATION => {
            let Some(m) = message.as_mut() else {
                return Some(End::Violation(Violation::protocol(
                    "a continuation frame outside any message",
                )));
            };
            m.payload.extend_from_slice(&payload);
            m.fragments += 1;
            if m.fragments > MAX_FRAGMENTS {
                return Some(End::Violation(Violation::too_big(format!(
                    "a message in more than {MAX_FRAGMENTS} fragments"
                ))));
            }
            if h.fin {
                let m = message.take()?;
                return complete(m, upstream, judge).await;
            }
            None
        }
        // `client_header` admits no other opcode.
        _ => Some(End::Violation(Violation::protocol("reserved opcode"))),
    }
}

/// Judges a complete message and forwards it if allowed.
async fn complete<W, J>(m: Assembly, upstream: &mut W, judge: &mut J) -> Option<End>
where
    W: AsyncWrite + Unpin,
    J: Judge,
{
    let verdict = if m.opcode == OP_TEXT {
        let Ok(text) = std::str::from_utf8(&m.payload) else {
            return Some(End::Violation(Violation::invalid_payload(
                "a text message that is not UTF-8",
            )));
        };
        judge.judge(Message::Text(text))
    } else {
        judge.judge(Message::Binary(&m.payload))
    };
    match verdict {
        Judged::Forward => send(upstream, m.opcode, &m.payload).await,
        Judged::Replace(text) => send(upstream, m.opcode, text.as_bytes()).await,
        Judged::Deny(why) => Some(End::Denied(why)),
        Judged::Revoked(why) => Some(End::Revoked(why)),
    }
}

/// One frame to the server, masked with a fresh key.
async fn send<W: AsyncWrite + Unpin>(upstream: &mut W, opcode: u8, payload: &[u8]) -> Option<End> {
    let bytes = frame::encode(opcode, payload, Some(mask_key()));
    match upstream.write_all(&bytes).await {
        Ok(()) => upstream.flush().await.err().map(|_| End::ServerGone),
        Err(_) => Some(End::ServerGone),
    }
}

/// A masking key a client script cannot predict (RFC 6455 §5.3).
fn mask_key() -> [u8; 4] {
    use ring::rand::SecureRandom as _;
    let mut key = [0_u8; 4];
    if ring::rand::SystemRandom::new().fill(&mut key).is_err() {
        // No system randomness: a key that still varies; the mask guards
        // intermediaries' caches, not secrecy.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        key = nanos.to_le_bytes();
    }
    key
}

/// Where the server's byte stream is: inside a frame's header or payload.
#[derive(Debug, Default)]
struct FrameCut {
    header: Vec<u8>,
    remaining: u64,
}

impl FrameCut {
    /// How many bytes at the start of `chunk` belong to the current piece
    /// (the rest of a header, or of a payload); advances past them.
    fn advance(&mut self, chunk: &[u8]) -> usize {
        if self.remaining > 0 {
            let take = usize::try_from(self.remaining).map_or(chunk.len(), |r| r.min(chunk.len()));
            self.remaining -= take as u64;
            return take;
        }
        for (i, &b) in chunk.iter().enumerate() {
            self.header.push(b);
            if let Some((_, payload)) = frame::server_frame_len(&self.header) {
                self.header.clear();
                self.remaining = payload;
                return i + 1;
            }
        }
        chunk.len()
    }

    fn at_boundary(&self) -> bool {
        self.header.is_empty() && self.remaining == 0
    }
}

/// Server → client, unjudged; a close the proxy sends (`inject`) goes out
/// at the next frame boundary, and ends the relay this way.
async fn server_to_client<R, W>(mut upstream: R, mut client: W, inject: oneshot::Receiver<Vec<u8>>)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0_u8; 16 * 1024];
    let mut cut = FrameCut::default();
    let mut inject = Some(inject);
    let mut pending: Option<Vec<u8>> = None;
    let mut give_up: Option<Instant> = None;
    loop {
        if let Some(close) = pending.as_ref().filter(|_| cut.at_boundary()) {
            let _ = client.write_all(close).await;
            break;
        }
        tokio::select! {
            got = injected(&mut inject) => {
                inject = None;
                if got.is_some() {
                    pending = got;
                    give_up = Some(Instant::now() + CLOSE_GRACE);
                }
            }
            read = upstream.read(&mut buf) => {
                let n = match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut chunk = buf.get(..n).unwrap_or_default();
                if pending.is_none() {
                    let mut rest = chunk;
                    while !rest.is_empty() {
                        let used = cut.advance(rest);
                        rest = rest.get(used..).unwrap_or_default();
                    }
                    if client.write_all(chunk).await.is_err() {
                        break;
                    }
                    continue;
                }
                // A close is waiting: write up to the next boundary only.
                while !chunk.is_empty() && !cut.at_boundary() {
                    let used = cut.advance(chunk);
                    let (piece, rest) = chunk.split_at(used.min(chunk.len()));
                    if client.write_all(piece).await.is_err() {
                        return;
                    }
                    chunk = rest;
                }
            }
            () = sleep_until(give_up) => break,
        }
    }
    let _ = client.flush().await;
    let _ = client.shutdown().await;
}

#[cfg(test)]
#[path = "relay_tests.rs"]
mod tests;
