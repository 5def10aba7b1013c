//! WebSocket behind the proxy: the opening handshake ([`handshake`]), the
//! frames ([`frame`]), the relay that judges every client message
//! ([`relay`]) and, after an upgrade that carried a secret, scrubs every
//! server message ([`scrubbed`]).

pub(super) mod frame;
pub(super) mod handshake;
pub(super) mod relay;
pub(super) mod scrubbed;
mod upgrade;

pub(super) use upgrade::upgrade;

use tokio::sync::oneshot;

/// The close the proxy sends down a server-to-client direction, once it
/// sends one; `None` when it was dropped unsent. Never ready again after
/// it was taken (the caller sets `inject` to `None`).
async fn injected(inject: &mut Option<oneshot::Receiver<Vec<u8>>>) -> Option<Vec<u8>> {
    match inject.as_mut() {
        Some(rx) => rx.await.ok(),
        None => std::future::pending().await,
    }
}
