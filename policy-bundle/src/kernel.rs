//! Kernel facts, each in one place: the Linux numbers the seccomp tables
//! compare arguments against, the tables themselves, the calls the
//! supervisor is asked about, and Landlock's rights by ABI.

pub mod landlock;
mod numbers;
mod seccomp;
mod trapped;

pub use seccomp::{deny_list, notify_list};
pub use trapped::TrappedCall;
