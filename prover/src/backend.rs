//! For the solver backend (`prover-z3`): what it reads of a problem.

pub use crate::domain::{Domain, MAPPED_V6, Sizes};
pub use crate::formula::{AddrCell, Def, Defs, F, Ids, Lit, Point};
pub use crate::oracle::{Answer, Oracle};
pub use crate::timing::Timings;
