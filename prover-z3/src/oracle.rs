//! The prover's formulas decided by Z3 at a concrete request's point, for
//! the differential tests: substituted and simplified ([`Oracle::decide`])
//! or asserted and solved ([`Oracle::decide_by_solver`]), to compare with
//! `policy_bundle::eval` and with the prover's own evaluation in Rust.

use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use policy_bundle::eval::Request;
use prover::ProverError;
use prover::backend::{self, Timings};

pub use prover::backend::Answer;

use crate::smt::Smt;

/// One bundle's formulas with Z3 ready, to answer single requests.
pub struct Oracle {
    inner: backend::Oracle,
    smt: Smt,
    /// `allow`, `audit` and `inject` as one Z3 term (three bits) with
    /// definitions inlined.
    packed: z3::ast::BV,
}

impl Oracle {
    /// Builds the domain and model of `b` alone and starts Z3 on them.
    pub fn new(b: &Bundle) -> Result<Oracle, ProverError> {
        let inner = backend::Oracle::new(b)?;
        let mut smt = Smt::new(
            inner.domain(),
            Instant::now() + Duration::from_secs(3600),
            &Timings::default(),
        );
        smt.define(inner.defs());
        let packed = Smt::pack(&inner.formulas().map(|f| smt.inline(inner.defs(), f)));
        Ok(Oracle { inner, smt, packed })
    }

    /// Decided by Z3 at the request's point: the formulas with the
    /// point's values substituted, simplified to a constant.
    pub fn decide(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        self.inner.decide_at(req, body, |p| {
            let bits = self.smt.bits_at(&self.packed, p)?;
            Some(Answer {
                allowed: bits & 4 != 0,
                audited: bits & 2 != 0,
                credential: bits & 1 != 0,
            })
        })
    }

    /// Decided by the solver (assert the point, check) — slower, used to
    /// check `decide` itself.
    pub fn decide_by_solver(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        let [allow, audit, inject] = self.inner.formulas();
        self.inner.decide_at(req, body, |p| {
            Some(Answer {
                allowed: self.smt.holds_at(allow, p)?,
                audited: self.smt.holds_at(audit, p)?,
                credential: self.smt.holds_at(inject, p)?,
            })
        })
    }

    /// Decided by evaluating the formulas in Rust at the request's point.
    pub fn decide_fast(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        self.inner.decide_fast(req, body)
    }
}
