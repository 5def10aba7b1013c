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
