//! The compiled bundle and the vocabulary every consumer of it shares: the
//! enforcement tables and their digest, the matchers that give patterns
//! their one meaning, the L7 body readers, the kernel facts the tables
//! compare against, and the reference evaluator. The front end
//! (`policy-lang`) writes bundles; the supervisor, the prover and
//! `bundle-trust` read them, and link nothing of the parser.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bundle;
pub mod eval;
pub mod kernel;
pub mod l7body;
pub mod matcher;
mod vocab;

pub use bundle::*;
pub use vocab::*;
