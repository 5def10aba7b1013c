//! Server → client after an upgrade that carried a secret, or on a
//! connection whose client messages may have secrets put in them
//! (`websocket_credential_rewrite`).
//!
//! The server's frames are read whole and checked as a client's are
//! (unmasked here), the fragments of a data message joined up to the
//! endpoint's message limit, and each message goes to the client as one
//! frame with every form of each secret replaced ([`SecretForms`], as HTTP
//! responses are scrubbed). A ping or pong payload is scrubbed and cut to
//! what a control frame holds; a close whose reason held the secret keeps
//! its code and loses the reason.
//!
//! A message is scrubbed on its own, as the client reads it: a server
//! that spread the secret over two messages would get it through, which
//! no server that echoes what it was sent does. A server frame the proxy
//! will not read, or a message over the limit, ends the connection with
//! the close of the client direction's codes (1002, 1007, 1009).

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;

use super::frame::{
    self, Header, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT, Violation,
};
use super::injected;
use crate::l7::forms::SecretForms;

/// What to take out of the server's messages, and the largest message
/// assembled to do it.
pub(in crate::l7) struct Scrubbing {
    /// Each secret's forms, with what replaces them.
    pub secrets: Vec<(SecretForms, Vec<u8>)>,
    pub limit: usize,
}

impl Scrubbing {
    fn found_in(&self, text: &[u8]) -> bool {
        self.secrets.iter().any(|(forms, _)| forms.found_in(text))
    }
}

/// A control frame's payload limit (RFC 6455 §5.5).
const MAX_CONTROL: usize = 125;

/// Relays the server's messages scrubbed; a close the proxy sends
/// (`inject`) goes out between two of them and ends the direction.
pub(super) async fn server_to_client<R, W>(
    mut upstream: R,
    mut client: W,
    inject: oneshot::Receiver<Vec<u8>>,
    scrub: Scrubbing,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut message: Option<(u8, Vec<u8>)> = None;
    let mut inject = Some(inject);
    'relay: loop {
        loop {
            let limit = scrub.limit;
            let assembled = message.as_ref().map_or(0, |(_, m)| m.len());
            let over = || {
                format!(
                    "a server message over the limit of {limit} bytes, which the proxy must read whole to scrub"
                )
            };
            let step = frame::take_whole(&mut buf, frame::server_header, assembled, limit, over)
                .and_then(|f| f.map(|(h, p)| take(h, p, &mut message, &scrub)).transpose());
            match step {
                Ok(None) => break,
                Ok(Some(None)) => {}
                Ok(Some(Some(out))) => {
                    if client.write_all(&out).await.is_err() {
                        break 'relay;
                    }
                }
                Err(v) => {
                    let payload = frame::close_payload(v.code, &v.reason);
                    let _ = client
                        .write_all(&frame::encode(OP_CLOSE, &payload, None))
                        .await;
                    break 'relay;
                }
            }
        }
        tokio::select! {
            got = injected(&mut inject) => {
                inject = None;
                // Only whole frames were written: this is a boundary.
                if let Some(close) = got {
                    let _ = client.write_all(&close).await;
                    break;
                }
            }
            read = upstream.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
        }
    }
    let _ = client.flush().await;
    let _ = client.shutdown().await;
}

/// One server frame: the bytes to send the client, if any yet.
fn take(
    h: Header,
    payload: BytesMut,
    message: &mut Option<(u8, Vec<u8>)>,
    scrub: &Scrubbing,
) -> Result<Option<Vec<u8>>, Violation> {
    match h.opcode {
        OP_PING | OP_PONG => {
            let mut body = scrubbed(scrub, payload.to_vec());
            body.truncate(MAX_CONTROL);
            Ok(Some(frame::encode(h.opcode, &body, None)))
        }
        OP_CLOSE => {
            let body = if scrub.found_in(&payload) {
                payload.get(..2).unwrap_or_default().to_vec()
            } else {
                payload.to_vec()
            };
            Ok(Some(frame::encode(OP_CLOSE, &body, None)))
        }
        OP_TEXT | OP_BINARY => {
            if message.is_some() {
                return Err(Violation::protocol(
                    "the server began a message before the last one ended",
                ));
            }
            if h.fin {
                return whole(scrub, h.opcode, payload.to_vec()).map(Some);
            }
            *message = Some((h.opcode, payload.to_vec()));
            Ok(None)
        }
        OP_CONTINUATION => {
            let Some((_, body)) = message.as_mut() else {
                return Err(Violation::protocol(
                    "a server continuation frame outside any message",
                ));
            };
            body.extend_from_slice(&payload);
            if !h.fin {
                return Ok(None);
            }
            match message.take() {
                Some((opcode, body)) => whole(scrub, opcode, body).map(Some),
                None => Ok(None),
            }
        }
        // `server_header` admits no other opcode.
        _ => Err(Violation::protocol("reserved opcode")),
    }
}

/// A complete message, scrubbed, as one frame.
fn whole(scrub: &Scrubbing, opcode: u8, body: Vec<u8>) -> Result<Vec<u8>, Violation> {
    let body = scrubbed(scrub, body);
    if opcode == OP_TEXT && std::str::from_utf8(&body).is_err() {
        return Err(Violation::invalid_payload(
            "a server text message that is not UTF-8",
        ));
    }
    Ok(frame::encode(opcode, &body, None))
}

fn scrubbed(scrub: &Scrubbing, body: Vec<u8>) -> Vec<u8> {
    scrub.secrets.iter().fold(body, |body, (forms, with)| {
        forms.replaced(&body, with).unwrap_or(body)
    })
}
