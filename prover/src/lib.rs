//! The prover: does a policy change widen what a credentialed binary can
//! reach? It answers from the compiled bundles (the tables enforcement
//! decides from), with a finite-domain search, or an SMT solver the caller
//! passes (Z3, from `prover-z3`), deciding over finite domains and
//! bit-vectors, and string patterns kept in automata. See `docs/prover.md`.
//!
//! Modules: [`strings`] splits host names, HTTP paths and executable paths
//! into atoms; `calls` is the JSON-RPC call a request body carries;
//! [`websocket`] the WebSocket upgrade and client messages;
//! [`domain`] gathers every dimension's values from both
//! bundles; [`formula`] is the formula DAG; [`model`] turns a bundle into
//! formulas mirroring `policy_bundle::eval`; [`query`] states the finding
//! categories; [`solver`] is what a proof asks of an SMT solver, started
//! when a question needs one; [`solve`] enumerates widened regions;
//! [`witness`] picks concrete requests and replays them; [`finding`] and
//! [`engine`] assemble reports; [`registry`], [`accepted`] and [`sandbox`]
//! read the binary registry, accepted risks and Landlock rules;
//! [`weakened`] compares two sandboxes' filesystem rights and enforcement,
//! `rebound` two policies' credential bindings; `binding` where one
//! credential binding lets its secret go; `rewrite` where
//! placeholders are replaced by secrets in bodies and messages, and
//! `placeholder` the witnesses that carry one; `slice` cuts a diff down
//! to what its changed rules can reach; `oracle`
//! answers single requests for the differential tests. `backend` is what
//! a solver backend reads of a problem.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod accepted;
#[doc(hidden)]
pub mod backend;
mod binding;
mod calls;
mod domain;
mod engine;
mod error;
mod fd;
mod finding;
mod formula;
mod graphql;
mod model;
mod oracle;
mod placeholder;
mod query;
mod rebound;
mod region;
mod registry;
mod registry_format;
mod rewrite;
mod sandbox;
mod secret;
mod slice;
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
