//! The calls the product's filter sends to the supervisor, in one place:
//! the compiler writes their names into the bundle's notify list, the
//! enforcer recognizes them by number in a notification, and the
//! supervisor answers each (its dispatch is an exhaustive `match`).

use super::numbers::{SYS_CONNECT, SYS_LISTEN, SYS_SENDMMSG, SYS_SENDMSG, SYS_SENDTO};

/// One trapped call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrappedCall {
    /// `connect`: the destination of every stream and datagram socket.
    Connect,
    /// `sendto` with an address: a datagram's destination.
    Sendto,
    /// `sendmsg`: its address sits in memory the filter cannot read.
    Sendmsg,
    /// `sendmmsg`: as `sendmsg`, for several messages.
    Sendmmsg,
    /// `listen`: on an unbound IP socket it binds an ephemeral port on
    /// every address, which Landlock's bind check never sees.
    Listen,
}

impl TrappedCall {
    /// Every call the supervisor answers. A bundle's notify list must name
    /// only these: a trapped call nobody answers fails at run time with
    /// `ENOSYS`, so the supervisor refuses such a bundle at load.
    pub const ALL: [TrappedCall; 5] = [
        TrappedCall::Connect,
        TrappedCall::Sendto,
        TrappedCall::Sendmsg,
        TrappedCall::Sendmmsg,
        TrappedCall::Listen,
    ];

    /// The name the bundle's notify list uses (libseccomp's name).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            TrappedCall::Connect => "connect",
            TrappedCall::Sendto => "sendto",
            TrappedCall::Sendmsg => "sendmsg",
            TrappedCall::Sendmmsg => "sendmmsg",
            TrappedCall::Listen => "listen",
        }
    }

    /// The call the bundle names `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<TrappedCall> {
        TrappedCall::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The x86-64 syscall number a notification carries.
    #[must_use]
    pub(crate) fn number(self) -> i64 {
        match self {
            TrappedCall::Connect => SYS_CONNECT,
            TrappedCall::Sendto => SYS_SENDTO,
            TrappedCall::Sendmsg => SYS_SENDMSG,
            TrappedCall::Sendmmsg => SYS_SENDMMSG,
            TrappedCall::Listen => SYS_LISTEN,
        }
    }

    /// The call with x86-64 number `nr`, if it is one the product traps.
    #[must_use]
    pub fn from_number(nr: i64) -> Option<TrappedCall> {
        TrappedCall::ALL.into_iter().find(|c| c.number() == nr)
    }
}
