//! The prover: does a policy change widen what a credentialed binary can
//! reach? It answers from the compiled bundles (the tables enforcement
//! decides from), with Z3 deciding over finite domains and bit-vectors
//! and string patterns kept in automata. See `docs/prover.md`.
//!
//! Modules: [`strings`] splits host names, HTTP paths and executable paths
//! into atoms; `calls` is the JSON-RPC call a request body carries;
//! [`websocket`] the WebSocket upgrade and client messages;
//! [`domain`] gathers every dimension's values from both
//! bundles; [`formula`] is the formula DAG; [`model`] turns a bundle into
//! formulas mirroring `policy_bundle::eval`; [`query`] states the finding
//! categories; [`solver`] creates Z3 when a question needs it and `smt`
//! talks to it (only with the `z3` feature); [`solve`] enumerates widened
//! regions;
//! [`witness`] picks concrete requests and replays them; [`finding`] and
//! [`engine`] assemble reports; [`registry`], [`accepted`] and [`sandbox`]
//! read the binary registry, accepted risks and Landlock rules;
//! [`weakened`] compares two sandboxes' filesystem rights and enforcement,
//! `rebound` two policies' credential bindings; `slice` cuts a diff down
//! to what its changed rules can reach; `oracle`
//! answers single requests for the differential tests (with `z3`).

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(feature = "z3"),
    expect(
        dead_code,
        reason = "much of the model is read only by the SMT layer and the oracle, which need `z3`"
    )
)]

pub mod accepted;
mod calls;
mod domain;
mod engine;
mod error;
mod fd;
mod finding;
mod formula;
mod graphql;
mod model;
#[cfg(feature = "z3")]
pub mod oracle;
mod query;
mod rebound;
mod region;
mod registry;
mod registry_format;
mod sandbox;
mod secret;
mod slice;
#[cfg(feature = "z3")]
mod smt;
mod solve;
pub mod solver;
pub mod strings;
mod timing;
mod weakened;
pub mod websocket;
mod witness;

pub use engine::{Options, Report, Verdict, check, diff, diff_owned, within};
pub use error::ProverError;
pub use finding::{Finding, Loc, Witness};
pub use query::Category;
pub use rebound::{Binding, CredentialChange, source_text};
pub use registry::Registry;
pub use weakened::SandboxChange;
