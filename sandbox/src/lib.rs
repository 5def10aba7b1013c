//! `openshell-sandbox`: the first process of the workload's sandbox.
//!
//! It is PID 1 of the workload's PID namespace: it starts the workload
//! and applies the bundle's kernel tables to it ([`launch`], from the
//! [`plan`] the supervisor hands it), answers the workload's trapped calls
//! ([`broker`]), and asks the supervisor about each TCP connect over the
//! sandbox protocol ([`relay`]), relaying the bytes of the
//! allowed ones. It depends on the enforcer, the bundle's data types and
//! the protocol alone: no policy source, no prover, no upstream credential
//! and no proxy key ever reach it. Started on its own on another host
//! ([`standalone`]), it holds one key: its end of the channel to the
//! supervisor, for its generation only.
//!
//! [`pid1`] holds what it owes the workload as its init: reaping, signals,
//! the workload's status, and an end to everything the workload started.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod broker;
pub mod brokering;
pub mod caller;
pub mod dns_stub;
pub mod exec;
pub mod freeze;
pub mod launch;
pub mod links;
pub mod mountinfo;
pub mod noexec;
pub mod pid1;
pub mod plan;
pub mod preflight;
pub mod relay;
pub mod standalone;
pub mod stdio;
pub mod trust;
pub mod writable;
