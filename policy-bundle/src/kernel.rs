//! Kernel facts, each in one place: the Linux numbers the seccomp tables
//! compare arguments against, and the tables themselves.

pub mod numbers;
mod seccomp;

pub use seccomp::{deny_list, notify_list};
