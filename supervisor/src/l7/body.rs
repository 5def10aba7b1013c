//! Request bodies the rules judge (JSON-RPC, MCP, GraphQL): read whole, up to the
//! endpoint's limit, before anything is forwarded, and then forwarded as
//! exactly those bytes.
//!
//! hyper has already undone the framing (`Content-Length` or chunked; a
//! request carrying both is read as chunked, the length dropped, and the
//! connection closed after it), so what is collected here is the body a
//! server would read. It goes upstream with a `Content-Length` of its own:
//! no transfer coding, no trailers (they are dropped, not judged), no
//! `Expect` (the client already got its `100 Continue` from hyper when the
//! body was first read). A body over the limit is never forwarded, in part
//! or whole.
//!
//! REST requests never come here: their bodies stream through
//! ([`UpstreamBody::Streamed`]), scanned for the placeholder marker in a
//! sandbox with credentials ([`UpstreamBody::Guarded`]).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::guarded::Guarded;

/// After a body went over its limit, how much more of it is read (and
/// thrown away) before the refusal is sent, and for how long: a client
/// still writing a body when the proxy closes gets a reset instead of the
/// `413` (the kernel resets a socket closed with unread data).
const DRAIN_BYTES: usize = 1 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// What a request sends upstream: the client's body as it streams in
/// (REST), scanned for the placeholder marker when the sandbox has
/// credentials, or the bytes that were judged (JSON-RPC, MCP, GraphQL).
#[derive(Debug)]
pub(super) enum UpstreamBody {
    Streamed(Incoming),
    Guarded(Box<Guarded>),
    Checked(Full<Bytes>),
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Self::Streamed(b) => Pin::new(b).poll_frame(cx).map_err(std::io::Error::other),
            Self::Guarded(b) => Pin::new(b.as_mut()).poll_frame(cx),
            Self::Checked(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Streamed(b) => b.is_end_stream(),
            Self::Guarded(b) => b.is_end_stream(),
            Self::Checked(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Streamed(b) => b.size_hint(),
            Self::Guarded(b) => b.size_hint(),
            Self::Checked(b) => b.size_hint(),
        }
    }
}

/// Why a body could not be judged.
#[derive(Debug)]
pub(super) enum ReadError {
    /// Longer than `limit` bytes (declared so by `Content-Length`, or
    /// found so while reading).
    TooLarge { limit: usize, declared: Option<u64> },
    /// The client stopped or broke the framing before the end.
    Broken(String),
}

/// Reads `body` whole if it is at most `limit` bytes. `expect_continue`:
/// the client waits for `100 Continue` before sending; a body declared too
/// long is then refused without inviting it.
pub(super) async fn read(
    mut body: Incoming,
    limit: usize,
    expect_continue: bool,
) -> Result<Bytes, ReadError> {
    let declared = body.size_hint().exact();
    if let Some(len) = declared
        && usize::try_from(len).map_or(true, |n| n > limit)
    {
        if !expect_continue {
            drain(body).await;
        }
        return Err(ReadError::TooLarge {
            limit,
            declared: Some(len),
        });
    }
    let capacity = declared.and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
    let mut got = BytesMut::with_capacity(capacity.min(limit));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ReadError::Broken(e.to_string()))?;
        // Trailers are not part of what is judged, and are not forwarded.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if got.len().saturating_add(data.len()) > limit {
            drain(body).await;
            return Err(ReadError::TooLarge {
                limit,
                declared: None,
            });
        }
        got.extend_from_slice(&data);
    }
    Ok(got.freeze())
}

/// Reads and discards what is left of `body`, within bounds.
pub(super) async fn drain(mut body: Incoming) {
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut seen = 0_usize;
        while let Some(Ok(frame)) = body.frame().await {
            seen = seen.saturating_add(frame.data_ref().map_or(0, Bytes::len));
            if seen > DRAIN_BYTES {
                break;
            }
        }
    })
    .await;
}
