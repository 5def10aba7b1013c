//! `openshell-sandbox`: the first process of the workload's sandbox.
//!
//! In the runtime this crate grows into, it is PID 1 of the workload's
//! PID namespace: it starts the workload, and (in later steps) applies the
//! bundle's kernel tables to it and relays its network operations to the
//! supervisor. It depends on the enforcer alone: no policy source, no
//! prover, no TLS, no credential ever reaches it.
//!
//! [`pid1`] holds what it owes the workload as its init: reaping, signals,
//! the workload's status, and an end to everything the workload started.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod pid1;
