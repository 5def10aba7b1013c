//! JSON bodies for the errors hyper answers itself. A request hyper cannot
//! parse (a malformed request line or header, a head over its buffer)
//! never reaches a handler: hyper writes a bare `400` or `431` with an
//! empty body and closes. Clients of this API read `{"error": ...}` from
//! every refusal, so the connection's writer recognises that answer — a
//! `4xx`/`5xx` head with `content-length: 0` and no content type, which
//! no handler writes — and sends the same status with a JSON body.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::app::App;

/// A connection whose writes pass through [`replacement`].
pub(crate) struct JsonErrors<T> {
    inner: T,
    app: Arc<App>,
    /// The answer being written instead of hyper's, how much of it is
    /// out, and the length of hyper's buffer it stands for.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> JsonErrors<T> {
    pub(crate) fn new(inner: T, app: Arc<App>) -> Self {
        Self {
            inner,
            app,
            pending: None,
        }
    }
}

/// The JSON answer for one of hyper's own error heads; `None` for every
/// other write.
#[must_use]
pub(crate) fn replacement(buf: &[u8]) -> Option<Vec<u8>> {
    let head = std::str::from_utf8(buf).ok()?;
    let rest = head.strip_prefix("HTTP/1.1 ")?;
    if !head.ends_with("\r\n\r\n") || !matches!(rest.as_bytes().first(), Some(b'4' | b'5')) {
        return None;
    }
    let lower = head.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n") || lower.contains("\r\ncontent-type:") {
        return None;
    }
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let (code, message) = match status {
        431 => (
            "header_too_large",
            "the request's head (request line and headers) is larger than the gateway reads",
        ),
        414 => (
            "uri_too_long",
            "the request's path is longer than the gateway reads",
        ),
        400 => (
            "malformed_request",
            "the request is not valid HTTP/1.1: its request line, a header or its body's framing could not be parsed",
        ),
        _ => (
            "malformed_request",
            "the request could not be read as HTTP/1.1",
        ),
    };
    let reason = rest.get(4..)?.split("\r\n").next()?;
    let body = crate::wire::ErrorBody {
        error: crate::wire::ErrorDetail {
            status,
            code: code.to_owned(),
            message: message.to_owned(),
        },
    };
    // Through a `Value`, as every other answer goes: keys sorted.
    let body = serde_json::to_value(&body).ok()?.to_string();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let me = &mut *self;
        if me.pending.is_none() {
            match replacement(buf) {
                Some(bytes) => {
                    me.app
                        .metrics
                        .malformed_requests
                        .fetch_add(1, Ordering::Relaxed);
                    me.pending = Some((bytes, 0, buf.len()));
                }
                None => return Pin::new(&mut me.inner).poll_write(cx, buf),
            }
        }
        // hyper calls again with the same buffer until it is taken whole.
        while let Some((bytes, done, stands_for)) = &mut me.pending {
            let rest = bytes.get(*done..).unwrap_or_default();
            if rest.is_empty() {
                let n = *stands_for;
                me.pending = None;
                return Poll::Ready(Ok(n));
            }
            let n = ready!(Pin::new(&mut me.inner).poll_write(cx, rest))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(0))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
        self.poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::replacement;

    #[test]
    fn only_hypers_own_empty_error_heads_are_replaced() {
        let hyper_400 = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\ndate: Thu, 03 Dec 2026 12:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(replacement(hyper_400).unwrap()).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["status"], 400);
        assert_eq!(v["error"]["code"], "malformed_request");
        let ours = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(ours).is_none());
        let not_modified = b"HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement(not_modified).is_none());
        let body_part = b"{\"error\": {\"status\": 400}}";
        assert!(replacement(body_part).is_none());
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\nno";
        assert!(replacement(with_body).is_none());
    }
}
