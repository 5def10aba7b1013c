//! The sandbox protocol, version 1: what `openshell-sandbox` (the
//! workload's side) and `openshell-supervisor` (the side that holds the
//! secrets and decides) say to each other, over gRPC. The contract is
//! `docs/sandbox-protocol.md`; the schema is `proto/sandbox.proto`, and
//! [`pb`] is its generated code.
//!
//! Nothing from the peer is used as it arrives: each message is checked
//! here first ([`FromSandbox::check`], [`FromSupervisor::check`],
//! [`RelayUpKind::check`], [`RelayDownKind::check`]) against the binding
//! the receiver expects and the limits below, and the order of a stream
//! is checked by [`ControlOrder`] and [`RelayOrder`]. A message that fails
//! any check is an error for the caller to refuse and log: the protocol
//! never allows by default.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod channel;
mod check;
mod order;
#[cfg(test)]
mod tests;
pub mod transport;

pub use check::{
    Caller, DatagramVerdict, Evidence, ExecDownKind, ExecRequest, ExecUpKind, FromSandbox,
    FromSupervisor, MAX_ARGS, ProtocolError, RefusalReport, RelayDownKind, RelayUpKind,
    decode_relay_up, decode_sandbox_message, decode_supervisor_message,
};
pub use order::{ControlOrder, ExecOrder, RelayOrder};

/// The generated messages and the `Broker` service.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::allow_attributes_without_reason,
    missing_docs,
    reason = "generated from proto/sandbox.proto"
)]
pub mod pb {
    tonic::include_proto!("openshell.sandbox.v1");
}

/// The version this crate speaks, in `Hello` and `Welcome`.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest encoded message either side accepts (tonic's decoding
/// limit): a data chunk or a DNS message and their framing.
pub const MAX_MESSAGE: usize = 80 * 1024;
/// The most bytes one relay message carries.
pub const MAX_CHUNK: usize = 64 * 1024;
/// The most bytes of a DNS message (the TCP length prefix's limit).
pub const MAX_DNS: usize = 65_535;
/// The most bytes of a UDP datagram's payload.
pub const MAX_DATAGRAM: usize = 65_507;
/// The most bytes of an executable's path (`PATH_MAX`).
pub const MAX_PATH: usize = 4096;
/// The most bytes of an `Evidence`'s binary links, names and targets
/// together: the message stays under [`MAX_MESSAGE`].
pub const MAX_LINKS: usize = 48 * 1024;
/// The most bytes of a reason the sandbox gives.
pub const MAX_REASON: usize = 1024;
/// The most streams open at once on one connection (HTTP/2's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`): relayed connections, the control
/// stream, and the few relay streams the sandbox opens ahead. A connect
/// beyond it waits until a relayed connection closes.
pub const MAX_STREAMS: u32 = 16_384;
/// The most bytes of the launch a `Welcome` carries: the message and its
/// framing stay under [`MAX_MESSAGE`].
pub const MAX_LAUNCH: usize = 76 * 1024;
/// The most bytes of a sandbox id.
pub const MAX_SANDBOX_ID: usize = 128;

/// Which sandbox, and which generation of it, both sides speak for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The sandbox's id (at most [`MAX_SANDBOX_ID`] bytes).
    pub sandbox_id: String,
    /// Its generation: a new one after every stop and start.
    pub generation: u64,
}

impl Binding {
    /// The binding every outgoing message carries.
    #[must_use]
    pub fn to_pb(&self) -> pb::Binding {
        pb::Binding {
            sandbox_id: self.sandbox_id.clone(),
            generation: self.generation,
        }
    }

    /// Whether an incoming message's binding is this one.
    pub fn check(&self, got: Option<&pb::Binding>) -> Result<(), ProtocolError> {
        let got = got.ok_or(ProtocolError::MissingBinding)?;
        if got.sandbox_id != self.sandbox_id || got.generation != self.generation {
            return Err(ProtocolError::WrongBinding {
                sandbox_id: got.sandbox_id.chars().take(MAX_SANDBOX_ID).collect(),
                generation: got.generation,
            });
        }
        Ok(())
    }
}
