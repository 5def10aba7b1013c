//! A request body let through only as far as it is known not to hold the
//! credential placeholder's marker, for the proxy's placeholder guard
//! (`placeholder`). The body is not buffered: the end of a piece that
//! could begin the marker (at most its length less one byte) waits for
//! the next piece to decide it, so a marker cut anywhere between pieces is
//! found before any byte of it leaves.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use policy_bundle::eval::Reason;

use crate::credentials::{CredentialSet, PLACEHOLDER_PREFIX};

/// How long the head of a request waits for the first piece of its body.
/// A client that holds its body back longer (until it sees an answer) is
/// not kept waiting: the head goes on, and the body is scanned as it
/// streams.
pub(super) const FIRST_PIECE_WAIT: Duration = Duration::from_secs(1);

const MARKER: &[u8] = PLACEHOLDER_PREFIX.as_bytes();

/// Set when a body was stopped for the marker after its head was sent.
#[derive(Debug, Clone, Default)]
pub(super) struct Stopped(Arc<AtomicBool>);

impl Stopped {
    pub fn get(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Why a body stopped.
#[derive(Debug)]
pub(super) enum Stop {
    Placeholder,
    Broken(String),
}

/// The client's body, let through as far as it is known not to hold the
/// marker.
pub(super) struct Guarded {
    /// The client's body; read to its end (`body::drain`) when it is
    /// refused before its head went on, so the client reads the refusal.
    pub(super) inner: Incoming,
    /// The end of what was read that could begin the marker.
    carry: Bytes,
    /// A piece decided while the head waited.
    ready: Option<Frame<Bytes>>,
    ended: bool,
    trailers: Option<Frame<Bytes>>,
    stopped: Stopped,
    /// Writes the deny-log line, once.
    on_stop: Option<Box<dyn FnOnce() + Send>>,
}

impl fmt::Debug for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("carry", &self.carry.len())
            .field("ended", &self.ended)
            .field("stopped", &self.stopped.get())
            .finish_non_exhaustive()
    }
}

impl Guarded {
    pub(super) fn new(
        inner: Incoming,
        stopped: Stopped,
        on_stop: Box<dyn FnOnce() + Send>,
    ) -> Self {
        Self {
            inner,
            carry: Bytes::new(),
            ready: None,
            ended: false,
            trailers: None,
            stopped,
            on_stop: Some(on_stop),
        }
    }

    /// Reads until some of the body is decided (or it ends), within
    /// [`FIRST_PIECE_WAIT`].
    pub(super) async fn first_piece(&mut self) -> Result<(), Stop> {
        let next = std::future::poll_fn(|cx| self.poll_next(cx));
        match tokio::time::timeout(FIRST_PIECE_WAIT, next).await {
            Err(_) | Ok(None) => Ok(()),
            Ok(Some(Ok(frame))) => {
                self.ready = Some(frame);
                Ok(())
            }
            Ok(Some(Err(stop))) => Err(stop),
        }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Stop>>> {
        loop {
            if self.ended {
                if !self.carry.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(std::mem::take(&mut self.carry)))));
                }
                return Poll::Ready(self.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut self.inner).poll_frame(cx)) {
                None => self.ended = true,
                Some(Err(e)) => return Poll::Ready(Some(Err(Stop::Broken(e.to_string())))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let Some((out, carry)) = pass(std::mem::take(&mut self.carry), data) else {
                            return Poll::Ready(Some(Err(Stop::Placeholder)));
                        };
                        self.carry = carry;
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(frame) => {
                        self.trailers = frame.into_trailers().ok().map(Frame::trailers);
                        self.ended = true;
                    }
                },
            }
        }
    }

    fn held(&self) -> u64 {
        let ready = self
            .ready
            .as_ref()
            .and_then(Frame::data_ref)
            .map_or(0, Bytes::len);
        u64::try_from(ready.saturating_add(self.carry.len())).unwrap_or(u64::MAX)
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if let Some(frame) = this.ready.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        let why = match ready!(this.poll_next(cx)) {
            None => return Poll::Ready(None),
            Some(Ok(frame)) => return Poll::Ready(Some(Ok(frame))),
            Some(Err(Stop::Placeholder)) => {
                this.stopped.0.store(true, Ordering::SeqCst);
                if let Some(log) = this.on_stop.take() {
                    log();
                }
                Reason::PlaceholderInBody.to_string()
            }
            Some(Err(Stop::Broken(why))) => why,
        };
        Poll::Ready(Some(Err(std::io::Error::other(why))))
    }

    fn is_end_stream(&self) -> bool {
        let inner_done = self.ended || self.inner.is_end_stream();
        inner_done && self.ready.is_none() && self.carry.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // Bytes are only delayed, never changed: the length is the client's.
        let inner = if self.ended {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        };
        let held = self.held();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower().saturating_add(held));
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper.saturating_add(held));
        }
        hint
    }
}

/// `carry` then `data`, split into what may go upstream and the end that
/// could still begin the marker; `None` when they hold the marker.
fn pass(carry: Bytes, data: Bytes) -> Option<(Bytes, Bytes)> {
    let text = if carry.is_empty() {
        data
    } else {
        let mut joined = BytesMut::with_capacity(carry.len().saturating_add(data.len()));
        joined.extend_from_slice(&carry);
        joined.extend_from_slice(&data);
        joined.freeze()
    };
    if CredentialSet::may_hold_placeholder(&text) {
        return None;
    }
    let cut = text.len().saturating_sub(marker_begun(&text));
    Some((text.slice(..cut), text.slice(cut..)))
}

/// The length of the longest end of `text` that begins the marker
/// (shorter than the marker, which was searched for whole already).
fn marker_begun(text: &[u8]) -> usize {
    (1..MARKER.len())
        .rev()
        .find(|&n| MARKER.get(..n).is_some_and(|m| text.ends_with(m)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` through `pass` as the body would: what went out, or
    /// `None` when the marker was found.
    fn through(pieces: &[&str]) -> Option<String> {
        let mut carry = Bytes::new();
        let mut out = Vec::new();
        for p in pieces {
            let (sent, rest) = pass(carry, Bytes::from(p.to_string()))?;
            // No byte of the marker has left before it is complete.
            assert!(!CredentialSet::may_hold_placeholder(&sent));
            out.extend_from_slice(&sent);
            carry = rest;
        }
        out.extend_from_slice(&carry);
        Some(String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_marker_is_found_wherever_the_pieces_cut_it() {
        let body = r#"{"token":"openshell-placeholder-tok-0123"}"#;
        for cut in 0..=body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(through(&[a, b]), None, "cut at {cut}");
        }
        let bytes: Vec<String> = body.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(through(&pieces), None);
    }

    #[test]
    fn a_body_without_the_marker_goes_through_whole_and_unchanged() {
        for pieces in [
            &["hello ", "world"][..],
            &["openshell-pla", "cebo"],
            &["o", "p", "e", "n", "x"],
            &["openshell-placeholder"],
            &["", "openshell", "", "-"],
        ] {
            assert_eq!(through(pieces).as_deref(), Some(pieces.concat().as_str()));
        }
    }

    #[test]
    fn only_an_end_that_begins_the_marker_waits() {
        let (sent, carry) = pass(Bytes::new(), Bytes::from_static(b"abc openshell-pl")).unwrap();
        assert_eq!(
            (&sent[..], &carry[..]),
            (&b"abc "[..], &b"openshell-pl"[..])
        );
        let (sent, carry) = pass(Bytes::new(), Bytes::from_static(b"abc")).unwrap();
        assert_eq!((&sent[..], carry.len()), (&b"abc"[..], 0));
        assert_eq!(marker_begun(b"xo"), 1);
        assert_eq!(marker_begun(b"openshell-placeholder"), MARKER.len() - 1);
    }
}
