//! A response to a request that carried a secret, with every form of the
//! secret ([`SecretForms`]) replaced: in the body across chunk boundaries
//! (bytes that could start an occurrence are held back until the next
//! chunk decides them), in header values of any encoding, in trailers.
//! Where a replacement cannot be made, the part is dropped: a header whose
//! name holds the secret, a value that would not be a valid header value.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderValue};

use super::forms::{SecretForms, splice};
use super::respond::BoxError;

pub(super) struct Scrub<B> {
    inner: B,
    forms: SecretForms,
    replacement: Vec<u8>,
    carry: Vec<u8>,
    /// The inner body ended (trailers, if any, wait here).
    ended: bool,
    trailers: Option<Frame<Bytes>>,
}

impl<B> Scrub<B> {
    pub(super) fn new(inner: B, forms: SecretForms, replacement: &[u8]) -> Self {
        Self {
            inner,
            forms,
            replacement: replacement.to_vec(),
            carry: Vec::new(),
            ended: false,
            trailers: None,
        }
    }

    /// What of `data` (after what was carried) can be sent now; keeps the
    /// undecided rest.
    fn process(&mut self, data: Bytes, end: bool) -> Bytes {
        if self.carry.is_empty() {
            let scan = self.forms.scan(&data, end);
            if scan.found.is_empty() {
                self.carry
                    .extend_from_slice(data.get(scan.decided..).unwrap_or_default());
                return data.slice(..scan.decided);
            }
            self.carry.extend_from_slice(&data);
        } else {
            self.carry.extend_from_slice(&data);
        }
        let scan = self.forms.scan(&self.carry, end);
        let decided = self.carry.get(..scan.decided).unwrap_or_default();
        let out = splice(decided, &scan.found, &self.replacement);
        self.carry.drain(..scan.decided);
        Bytes::from(out)
    }
}

/// `headers` with every form of the secret replaced in values, and the
/// fields that cannot be scrubbed dropped. `true` when anything changed.
pub(super) fn scrub_headers(headers: &mut HeaderMap, forms: &SecretForms, with: &[u8]) -> bool {
    let touched = headers
        .iter()
        .any(|(n, v)| forms.found_in(n.as_str().as_bytes()) || forms.found_in(v.as_bytes()));
    if !touched {
        return false;
    }
    let old = std::mem::take(headers);
    let mut name = None;
    for (n, value) in old {
        if let Some(n) = n {
            name = Some(n);
        }
        let Some(name) = name.clone() else { continue };
        if forms.found_in(name.as_str().as_bytes()) {
            continue;
        }
        let value = match forms.replaced(value.as_bytes(), with) {
            None => value,
            Some(bytes) => match HeaderValue::from_bytes(&bytes) {
                Ok(v) => v,
                Err(_) => continue,
            },
        };
        headers.append(name, value);
    }
    true
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
                    let out = this.process(Bytes::new(), true);
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => this.ended = true,
                Some(Err(e)) => return Poll::Ready(Some(Err(BoxError::other(e)))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.process(data, false);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(frame) => {
                        if let Ok(mut trailers) = frame.into_trailers() {
                            scrub_headers(&mut trailers, &this.forms, &this.replacement);
                            this.trailers = Some(Frame::trailers(trailers));
                        }
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
        // Replacements change the length.
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use std::collections::VecDeque;

    /// Chunks, one frame each, then the trailers if any.
    struct Chunks(VecDeque<Frame<Bytes>>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.get_mut().0.pop_front().map(Ok))
        }
    }

    fn frames(chunks: &[&str]) -> VecDeque<Frame<Bytes>> {
        chunks
            .iter()
            .map(|c| Frame::data(Bytes::from(c.to_string())))
            .collect()
    }

    async fn scrub(chunks: &[&str], needle: &str, with: &str) -> String {
        let body = Chunks(frames(chunks));
        let out = Scrub::new(body, SecretForms::new(needle.as_bytes()), with.as_bytes())
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
        assert_eq!(scrub(&["a se%4", "3r", "ET"], "SECRET", "P").await, "a P");
    }

    /// Every cut of every echoed form, one byte per chunk included.
    #[tokio::test]
    async fn an_encoded_secret_cut_anywhere_is_replaced() {
        let secret = "real-secret-0123456789";
        for text in [
            "<p>real&#45;secret-0123456789</p>",
            "{\"u\":\"real\\u002dsecret-0123456789\"}",
            "x=real%2Dsecret%2D0123456789&y",
        ] {
            for cut in 0..text.len() {
                let (a, b) = text.split_at(cut);
                let out = scrub(&[a, b], secret, "P").await;
                assert!(!out.contains("secret"), "{text} cut at {cut}: {out}");
            }
            let bytes: Vec<String> = text.chars().map(String::from).collect();
            let bytes: Vec<&str> = bytes.iter().map(String::as_str).collect();
            let out = scrub(&bytes, secret, "P").await;
            assert!(!out.contains("secret"), "{text} byte by byte: {out}");
        }
    }

    /// The laid-out and rarer forms: the body scrubbed whole, cut once
    /// anywhere, and one byte per chunk, comes out the same, with the
    /// occurrence replaced.
    #[tokio::test]
    async fn a_laid_out_or_rarely_escaped_secret_cut_anywhere_is_replaced() {
        let secret = "real-secret-0123456789";
        let table = [
            (
                "<72:65:61:6C:2d:73:65:63:72:65:74:2d:30:31:32:33:34:35:36:37:38:39>",
                "<P>",
            ),
            (
                "{0x72, 0x65, 0x61, 0x6c, 0x2d, 0x73, 0x65, 0x63, 0x72, 0x65, 0x74, 0x2d, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39}",
                "{0xP}",
            ),
            (
                "00000000: 4265 6172 6572 2072 6561 6c2d 7365 6372  Bearer real-secr\n00000010: 6574 2d30 3132 3334 3536 3738 390a       et-0123456789.\n",
                "00000000: 4265 6172 6572 20P.\n",
            ),
            (
                "x=QmVhcmVyIHJlYWwtc2VjcmV0\r\nLTAxMjM0NTY3ODkgYW5k;",
                "x=QmVhcmVyIHPkgYW5k;",
            ),
            (
                "\"eHlCZWFyZXIgcmVhbC1z\\nZWNyZXQtMDEyMzQ1Njc4OSBhbmQ\"",
                "\"eHlCZWFyZXIgPSBhbmQ\"",
            ),
            ("<p>real&#0000045;secret&#x0002D;0123456789</p>", "<p>P</p>"),
            ("real\\055secret\\u{2d}0123456789 %u0041", "P %u0041"),
            ("u=real%u002Dsecret\\0055\\x30123456789&", "u=P&"),
        ];
        for (text, want) in table {
            assert_eq!(scrub(&[text], secret, "P").await, want, "{text}");
            for cut in 0..text.len() {
                let (a, b) = text.split_at(cut);
                let out = scrub(&[a, b], secret, "P").await;
                assert_eq!(out, want, "{text} cut at {cut}");
            }
            let bytes: Vec<String> = text.chars().map(String::from).collect();
            let bytes: Vec<&str> = bytes.iter().map(String::as_str).collect();
            assert_eq!(
                scrub(&bytes, secret, "P").await,
                want,
                "{text} byte by byte"
            );
        }
    }

    #[tokio::test]
    async fn trailers_are_scrubbed() {
        let mut frames = frames(&["body"]);
        let mut trailers = HeaderMap::new();
        trailers.insert("x-echo", HeaderValue::from_static("Bearer SECRETSECRET"));
        trailers.insert("x-secretsecret", HeaderValue::from_static("1"));
        frames.push_back(Frame::trailers(trailers));
        let collected = Scrub::new(Chunks(frames), SecretForms::new(b"SECRETSECRET"), b"P")
            .collect()
            .await
            .unwrap();
        let trailers = collected.trailers().unwrap().clone();
        assert_eq!(trailers.len(), 1, "{trailers:?}");
        assert_eq!(trailers["x-echo"], "Bearer P");
    }

    #[test]
    fn header_names_holding_the_secret_are_dropped_and_any_value_is_scrubbed() {
        let forms = SecretForms::new(b"Real-Secret-0123456789");
        let mut h = HeaderMap::new();
        h.insert("x-real-secret-0123456789", HeaderValue::from_static("1"));
        h.insert(
            "x-latin1",
            HeaderValue::from_bytes(b"\xe9 Real-Secret-0123456789 \xff").unwrap(),
        );
        h.append("x-two", HeaderValue::from_static("a"));
        h.append(
            "x-two",
            HeaderValue::from_static("b real-secret-0123456789"),
        );
        h.insert("x-clean", HeaderValue::from_static("ok"));
        assert!(scrub_headers(&mut h, &forms, b"P"));
        assert!(!h.contains_key("x-real-secret-0123456789"));
        assert_eq!(h["x-latin1"].as_bytes(), b"\xe9 P \xff");
        let two: Vec<&[u8]> = h
            .get_all("x-two")
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        assert_eq!(two, [b"a".as_slice(), b"b P"]);
        assert_eq!(h["x-clean"], "ok");
        assert!(!scrub_headers(&mut h, &forms, b"P"), "nothing left to do");
    }
}
