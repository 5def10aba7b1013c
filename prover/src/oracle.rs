//! The prover's own answer to "is this concrete request allowed, and does
//! it carry a credential?": the request is mapped to atoms and values, and
//! the bundle's formulas are decided at that point, here by evaluating
//! them in Rust and in `prover-z3` by Z3. The differential tests compare
//! both with `policy_bundle::eval` on generated policies.

use policy_bundle::Bundle;
use policy_bundle::eval::Request;
use policy_bundle::matcher::{canonical_ip, canonicalize_path, normalize_host, parse_query_string};

use crate::domain::{Domain, Extra};
use crate::error::ProverError;
use crate::formula::{Defs, F, Point};
use crate::model::{self, BinaryFacts, Model};
use crate::sandbox::Sandbox;

/// One bundle's domain and formulas, to answer single requests in the
/// differential tests.
pub struct Oracle {
    dom: Domain,
    defs: Defs,
    model: Model,
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
    /// Builds the domain and model of `b` alone.
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
        Ok(Oracle { dom, defs, model })
    }

    /// The domain the formulas range over.
    pub fn domain(&self) -> &Domain {
        &self.dom
    }

    /// The definitions the formulas refer to.
    pub fn defs(&self) -> &Defs {
        &self.defs
    }

    /// `allow`, `audit` and `inject`, in that order (as in [`Answer`]).
    pub fn formulas(&self) -> [&F; 3] {
        [&self.model.allow, &self.model.audit, &self.model.inject]
    }

    /// The point a request with this body (`None`: no body) stands for;
    /// `None` when its path cannot be canonicalized or its query string
    /// decoded (the generator avoids those: the model's path variable is a
    /// canonical path), or the body is a batch (the model has single
    /// calls, see `crate::calls`).
    fn point(&self, req: &Request, body: Option<&[u8]>) -> Option<Point> {
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

    /// Decided by `at` at the request's point; `None` when the request
    /// is outside the model (its path cannot be canonicalized, its body
    /// is a batch). A request with neither a host name nor an address
    /// goes nowhere: nothing lets it through, whatever `at` would say.
    pub fn decide_at(
        &self,
        req: &Request,
        body: Option<&[u8]>,
        at: impl FnOnce(&Point) -> Option<Answer>,
    ) -> Option<Answer> {
        let p = self.point(req, body)?;
        if !(p.has_addr || p.host != self.dom.host_none()) {
            return Some(Answer {
                allowed: false,
                audited: false,
                credential: false,
            });
        }
        at(&p)
    }

    /// Decided by evaluating the formulas in Rust at the request's point.
    pub fn decide_fast(&self, req: &Request, body: Option<&[u8]>) -> Option<Answer> {
        self.decide_at(req, body, |p| {
            let v = self.defs.values(p);
            Some(Answer {
                allowed: p.eval(&self.model.allow, &v),
                audited: p.eval(&self.model.audit, &v),
                credential: p.eval(&self.model.inject, &v),
            })
        })
    }
}
