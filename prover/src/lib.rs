//! The prover: does a policy change widen what a credentialed binary can
//! reach? It answers from the compiled bundles (the tables enforcement
//! decides from), with Z3 deciding over finite domains and bit-vectors
//! and string patterns kept in automata. See `docs/prover.md`.
//!
//! Modules: [`strings`] splits host names, HTTP paths and executable paths
//! into atoms; [`calls`] is the JSON-RPC call a request body carries;
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
//! [`weakened`] compares two sandboxes' filesystem rights and enforcement; `oracle`
//! answers single requests for the differential tests (with `z3`).

#![forbid(unsafe_code)]

pub mod accepted;
pub mod calls;
pub mod domain;
pub mod engine;
pub mod error;
pub mod fd;
pub mod finding;
pub mod formula;
pub mod graphql;
pub mod model;
#[cfg(feature = "z3")]
pub mod oracle;
pub mod query;
pub mod region;
pub mod registry;
mod registry_format;
pub mod sandbox;
#[cfg(feature = "z3")]
pub mod smt;
pub mod solve;
pub mod solver;
pub mod strings;
pub mod timing;
pub mod weakened;
pub mod websocket;
pub mod witness;

pub use engine::{Options, Report, Verdict, check, diff};
pub use error::ProverError;
pub use finding::{Finding, Loc, Witness};
pub use query::Category;
pub use registry::Registry;
pub use weakened::SandboxChange;
