//! Z3 as the prover's SMT solver: pass [`Z3`] in
//! [`prover::Options::solver`].
//!
//! A crate of its own so that linking `libz3` is a choice each program
//! makes by depending on it (`openshell-policy-solver`, the gateway), not
//! a cargo feature: one build of the workspace unifies features, and a
//! feature turned on for one program linked Z3 into `openshell-policy`
//! too, which loading it would cost a third of a typical `diff --prove`.
//!
//! Modules: `smt` translates the prover's formulas into Z3 and reads its
//! models back as points; [`oracle`] decides single requests with it for
//! the differential tests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod oracle;
mod smt;

use std::time::Instant;

use prover::backend::{Defs, Domain, F, Point, Timings};
use prover::solver::{Backend, Sat, Session};
use z3::SatResult;

use crate::smt::Smt;

/// Z3, in process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Z3;

impl Backend for Z3 {
    fn start(
        &self,
        dom: &Domain,
        defs: &Defs,
        deadline: Instant,
        timings: &Timings,
    ) -> Box<dyn Session> {
        let mut smt = Smt::new(dom, deadline, timings);
        smt.define(defs);
        Box::new(InProcess(smt))
    }
}

struct InProcess(Smt);

impl Session for InProcess {
    fn push(&self) {
        self.0.push();
    }

    fn pop(&self) {
        self.0.pop();
    }

    fn assert(&self, f: &F) {
        self.0.assert(self.0.translate(f));
    }

    fn check(&self) -> Sat {
        match self.0.check() {
            SatResult::Sat => Sat::Sat,
            SatResult::Unsat => Sat::Unsat,
            SatResult::Unknown => Sat::Unknown(
                self.0
                    .reason_unknown()
                    .unwrap_or_else(|| "unknown".to_owned()),
            ),
        }
    }

    fn model(&self) -> Option<Point> {
        self.0.model().map(|m| self.0.point(&m))
    }

    fn smt2(&self) -> String {
        self.0.to_smt2()
    }

    fn term(&self, f: &F) -> String {
        self.0.translate(f).to_string()
    }
}
