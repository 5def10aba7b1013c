//! WebSocket behind the proxy: the opening handshake ([`handshake`]), the
//! frames ([`frame`]) and the relay that judges every client message
//! ([`relay`]).

pub(super) mod frame;
pub(super) mod handshake;
pub(super) mod relay;
mod upgrade;

pub(super) use upgrade::upgrade;
