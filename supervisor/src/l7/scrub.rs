//! A response body with every occurrence of a secret replaced, across
//! chunk boundaries: bytes that could start an occurrence are held back
//! until the next chunk (at most `secret.len() - 1` of them).
//!
//! A compressed body (`Content-Encoding: gzip`...) is not decoded, so an
//! echo of the secret inside it passes unseen: a known gap, see
//! `docs/proxy.md`.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::respond::BoxError;

pub(super) struct Scrub<B> {
    inner: B,
    needle: Vec<u8>,
    replacement: Vec<u8>,
    carry: Vec<u8>,
    /// The inner body ended (trailers, if any, wait here).
    ended: bool,
    trailers: Option<Frame<Bytes>>,
}

impl<B> Scrub<B> {
    pub(super) fn new(inner: B, needle: &[u8], replacement: &[u8]) -> Self {
        Self {
            inner,
            needle: needle.to_vec(),
            replacement: replacement.to_vec(),
            carry: Vec::new(),
            ended: false,
            trailers: None,
        }
    }

    /// Replaces what is complete in `carry`; returns what can be sent.
    fn process(&mut self, flush: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.carry.len());
        let mut last = 0;
        for at in memchr::memmem::find_iter(&self.carry, &self.needle) {
            if at < last {
                continue;
            }
            out.extend_from_slice(self.carry.get(last..at).unwrap_or_default());
            out.extend_from_slice(&self.replacement);
            last = at + self.needle.len();
        }
        let keep = if flush {
            0
        } else {
            self.needle.len().saturating_sub(1)
        };
        let safe = last.max(self.carry.len().saturating_sub(keep));
        out.extend_from_slice(self.carry.get(last..safe).unwrap_or_default());
        self.carry.drain(..safe);
        out
    }
}

impl<B> Body for Scrub<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                if !this.carry.is_empty() {
                    let out = this.process(true);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => this.ended = true,
                Some(Err(e)) => return Poll::Ready(Some(Err(BoxError::other(e)))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        this.carry.extend_from_slice(&data);
                        let out = this.process(false);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    Err(trailers) => {
                        this.trailers = Some(trailers);
                        this.ended = true;
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.carry.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.needle.len() == self.replacement.len() {
            self.inner.size_hint()
        } else {
            SizeHint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use std::collections::VecDeque;

    /// Chunks, one frame each.
    struct Chunks(VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    async fn scrub(chunks: &[&str], needle: &str, with: &str) -> String {
        let body = Chunks(chunks.iter().map(|c| Bytes::from(c.to_string())).collect());
        let out = Scrub::new(body, needle.as_bytes(), with.as_bytes())
            .collect()
            .await
            .unwrap()
            .to_bytes();
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn secrets_are_replaced_across_chunks() {
        assert_eq!(scrub(&["a SECRET b"], "SECRET", "P").await, "a P b");
        assert_eq!(
            scrub(&["a SEC", "RET b SE", "CRET"], "SECRET", "P").await,
            "a P b P"
        );
        assert_eq!(scrub(&["SECRE", "x"], "SECRET", "P").await, "SECREx");
        assert_eq!(scrub(&["", "S", "E"], "SECRET", "P").await, "SE");
        assert_eq!(scrub(&["SECRETSECRET"], "SECRET", "PP").await, "PPPP");
    }
}
