//! The prover's own answer to "is this concrete request allowed, and does
//! it carry a credential?": the request is mapped to atoms and values, and
//! Z3 decides the bundle's formulas at that point. The differential tests
//! compare it with `policy_bundle::eval` on generated policies.

use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use policy_bundle::eval::Request;
use policy_bundle::matcher::{canonical_ip, canonicalize_path, normalize_host, parse_query_string};

use crate::domain::{Domain, Extra};
use crate::error::ProverError;
use crate::formula::{Defs, Point};
use crate::model::{self, BinaryFacts, Model};
use crate::sandbox::Sandbox;
use crate::smt::Smt;

/// One bundle's formulas with Z3 ready, to answer single requests in
/// the differential tests.
pub struct Oracle {
    pub(crate) dom: Domain,
    pub(crate) defs: Defs,
    pub(crate) model: Model,
    smt: Smt,
    /// `allow`, `audit` and `inject` as one Z3 term (three bits) with
    /// definitions inlined.
    packed: z3::ast::BV,
}

/// The prover's decision on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// The request is let through (allowed or audited).
    pub allowed: bool,
    /// Let through only because the endpoints are in audit mode.
    pub audited: bool,
    /// The proxy injects a credential on it.
    pub credential: bool,
}

impl Oracle {
    /// Builds the domain and model of `b` alone and starts Z3 on them.
    pub fn new(b: &Bundle) -> Result<Oracle, ProverError> {
        let dom = Domain::build(
            &[b],
            &Extra::default(),
            crate::strings::search::BUDGET,
            &crate::timing::Timings::default(),
        )?;
        let mut defs = Defs::default();
        let model = model::build(
            "p",
            b,
            &dom,
            &BinaryFacts::default(),
            &Sandbox::of(b),
            &mut defs,
        );
        let mut smt = Smt::new(
            &dom,
            Instant::now() + Duration::from_secs(3600),
            &crate::timing::Timings::default(),
        );
        smt.define(&defs);
        let packed = Smt::pack(&[
            smt.inline(&defs, &model.allow),
            smt.inline(&defs, &model.audit),
            smt.inline(&defs, &model.inject),
        ]);
        Ok(Oracle {
            dom,
            defs,
            model,
            smt,
            packed,
        })
    }

    /// The point a request with this body (`None`: no body) stands for;
    /// `None` when its path cannot be canonicalized or its query string
    /// decoded (the generator avoids those: the model's path variable is a
    /// canonical path), or the body is a batch (the model has single
    /// calls, see `crate::calls`).
    pub(crate) fn point(&self, req: &Request, body: Option<&[u8]>) -> Option<Point> {
        let dom = &self.dom;
        let mut addr = req.addr.map(canonical_ip);
        let mut host = dom.host_none();
        if let Some(h) = &req.host {
            match h
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
            {
                Ok(ip) => addr = Some(addr.unwrap_or(canonical_ip(ip))),
                Err(_) => {
                    if let Ok(n) = normalize_host(h) {
                        host = dom.hosts.classify(&n)?;
                    }
                }
            }
        }
        let (method, target) = req
            .http
            .as_ref()
            .map(|h| (h.method.clone(), h.target.clone()))
            .unwrap_or_else(|| ("GET".to_owned(), "/".to_owned()));
        let canon = canonicalize_path(&target, dom.encoded_slash).ok()?;
        let params = match canon.query.as_deref() {
            Some(q) => parse_query_string(q).ok()?,
            None => Vec::new(),
        };
        let (has_addr, v6, a4, a6) = match addr {
            None => (false, false, 0, 0),
            Some(std::net::IpAddr::V4(v)) => (true, false, u32::from(v), 0),
            Some(std::net::IpAddr::V6(v)) => (true, true, 0, u128::from(v)),
        };
        Some(Point {
            bin: dom.bins.classify(&req.binary)?,
            sha: dom.sha_index(req.sha256.as_deref()),
            host,
            has_addr,
            v6,
            a4,
            a6,
            port: req.port,
            method: dom.method_index(&method),
            path: dom.paths.classify(&canon.path)?,
            call: dom.calls.classify(body)?,
            qa: dom.queries.iter().map(|q| q.allows(&params)).collect(),
            qd: dom.queries.iter().map(|q| q.denies(&params)).collect(),
        })
    }

    /// Decided by Z3 at the request's point: the formulas with the
    /// point's values substituted, simplified to a constant.
    pub fn decide(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        let p = self.point(req, body)?;
        if !(p.has_addr || p.host != self.dom.host_none()) {
            return Some(Answer {
                allowed: false,
                audited: false,
                credential: false,
            });
        }
        let bits = self.smt.bits_at(&self.packed, &p)?;
        Some(Answer {
            allowed: bits & 4 != 0,
            audited: bits & 2 != 0,
            credential: bits & 1 != 0,
        })
    }

    /// Decided by the solver (assert the point, check) — slower, used to
    /// check `decide` itself.
    pub fn decide_by_solver(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        let p = self.point(req, body)?;
        if !(p.has_addr || p.host != self.dom.host_none()) {
            return Some(Answer {
                allowed: false,
                audited: false,
                credential: false,
            });
        }
        Some(Answer {
            allowed: self.smt.holds_at(&self.model.allow, &p)?,
            audited: self.smt.holds_at(&self.model.audit, &p)?,
            credential: self.smt.holds_at(&self.model.inject, &p)?,
        })
    }

    /// Decided by evaluating the formulas in Rust at the request's point.
    pub fn decide_fast(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        let p = self.point(req, body)?;
        if !(p.has_addr || p.host != self.dom.host_none()) {
            return Some(Answer {
                allowed: false,
                audited: false,
                credential: false,
            });
        }
        let v = self.defs.values(&p);
        Some(Answer {
            allowed: p.eval(&self.model.allow, &v),
            audited: p.eval(&self.model.audit, &v),
            credential: p.eval(&self.model.inject, &v),
        })
    }
}
