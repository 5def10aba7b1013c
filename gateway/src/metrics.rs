//! What `/metrics` reports, in Prometheus' text format: requests by route
//! and status, their latency, proofs by verdict and their duration, the
//! long-polls waiting, connections, store errors, and the refusals that
//! were counted instead of audited.
//!
//! Routes are reported by their template (`/v1/sandboxes/{id}/bundle`),
//! never by the path asked for: a path is the client's text, and a label
//! per path would let anyone grow this table without bound.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (bound, n) in BUCKETS.iter().zip(self.counts.iter_mut()) {
            if s <= *bound {
                *n += 1;
            }
        }
        self.count += 1;
        self.sum += s;
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (bound, n) in BUCKETS.iter().zip(self.counts.iter()) {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}",
            self.count
        );
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", self.sum);
        let _ = writeln!(out, "{name}_count{braces} {}", self.count);
    }
}

/// The counters `/metrics` renders, per process: each replica counts its
/// own, and the scraper adds them up.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), u64>>,
    latency: Mutex<BTreeMap<&'static str, Histogram>>,
    proofs: Mutex<BTreeMap<String, Histogram>>,
    pub(crate) store_errors: AtomicU64,
    /// Connections closed at accept: over the total or the per-peer limit.
    pub connections_refused: AtomicU64,
    /// Unauthenticated refusals over the audit rate: counted here and in a
    /// summary row, not audited one by one.
    pub refusals_unaudited: AtomicU64,
    /// Requests that were not valid HTTP/1.1, answered by the HTTP layer
    /// before the API saw them.
    pub malformed_requests: AtomicU64,
}

/// What the gateway reads off its other parts when it renders.
pub(crate) struct Gauges {
    pub(crate) waiting: usize,
    pub(crate) topics: usize,
    pub(crate) connections: usize,
    pub(crate) proofs_running: usize,
}

impl Metrics {
    pub(crate) fn request(
        &self,
        method: &hyper::Method,
        route: &'static str,
        status: u16,
        d: Duration,
    ) {
        let method = method_label(method);
        *self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((method, route, status))
            .or_default() += 1;
        self.latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(route)
            .or_default()
            .observe(d);
    }

    pub(crate) fn proof(&self, verdict: &str, d: Duration) {
        self.proofs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(verdict.to_owned())
            .or_default()
            .observe(d);
    }

    #[must_use]
    pub(crate) fn render(&self, g: &Gauges) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP openshell_gateway_requests_total Requests answered, by method, route template and status.\n\
             # TYPE openshell_gateway_requests_total counter\n",
        );
        for ((m, route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let _ = writeln!(
                out,
                "openshell_gateway_requests_total{{method=\"{m}\",route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        out.push_str(
            "# HELP openshell_gateway_request_duration_seconds Time from the request's head to its answer (long-polls included).\n\
             # TYPE openshell_gateway_request_duration_seconds histogram\n",
        );
        for (route, h) in self
            .latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            h.write(
                &mut out,
                "openshell_gateway_request_duration_seconds",
                &format!("route=\"{route}\""),
            );
        }
        out.push_str(
            "# HELP openshell_gateway_proof_duration_seconds Proofs of proposals against the active revision, by verdict; within a boundary, by containment-VERDICT.\n\
             # TYPE openshell_gateway_proof_duration_seconds histogram\n",
        );
        for (verdict, h) in self
            .proofs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            h.write(
                &mut out,
                "openshell_gateway_proof_duration_seconds",
                &format!("verdict=\"{}\"", escape(verdict)),
            );
        }
        let gauges = [
            (
                "openshell_gateway_waiting_polls",
                "Long-polls waiting for a change.",
                g.waiting,
            ),
            (
                "openshell_gateway_wait_topics",
                "Policies and sandboxes some long-poll waits on.",
                g.topics,
            ),
            (
                "openshell_gateway_connections",
                "Client connections open.",
                g.connections,
            ),
            (
                "openshell_gateway_proofs_running",
                "Proofs running now.",
                g.proofs_running,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [
            (
                "openshell_gateway_store_errors_total",
                "Requests answered 503 because the database did not answer.",
                &self.store_errors,
            ),
            (
                "openshell_gateway_connections_refused_total",
                "Connections closed at once: over the total or per-peer limit.",
                &self.connections_refused,
            ),
            (
                "openshell_gateway_refusals_unaudited_total",
                "Unauthenticated refusals counted instead of audited (over the audit rate).",
                &self.refusals_unaudited,
            ),
            (
                "openshell_gateway_malformed_requests_total",
                "Requests that were not valid HTTP/1.1, answered by the HTTP layer.",
                &self.malformed_requests,
            ),
        ];
        for (name, help, c) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                c.load(Ordering::Relaxed)
            );
        }
        out
    }
}

fn method_label(m: &hyper::Method) -> &'static str {
    match *m {
        hyper::Method::GET => "GET",
        hyper::Method::POST => "POST",
        hyper::Method::PUT => "PUT",
        hyper::Method::DELETE => "DELETE",
        hyper::Method::HEAD => "HEAD",
        hyper::Method::PATCH => "PATCH",
        hyper::Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

fn escape(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .collect()
}

/// The route template a path is answered by, for labels and the access
/// log; `other` for a path no route has.
#[must_use]
pub fn route_template(path: &str) -> &'static str {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match parts.as_slice() {
        ["healthz"] => "/healthz",
        ["readyz"] => "/readyz",
        ["metrics"] => "/metrics",
        ["v1", "policies", _, "proposals"] => "/v1/policies/{name}/proposals",
        ["v1", "policies", _, "proposals", "from-denials"] => {
            "/v1/policies/{name}/proposals/from-denials"
        }
        ["v1", "policies", _, "revisions"] => "/v1/policies/{name}/revisions",
        ["v1", "policies", _, "revisions", _] => "/v1/policies/{name}/revisions/{rev}",
        ["v1", "policies", _, "rollback"] => "/v1/policies/{name}/rollback",
        ["v1", "policies", _, "boundary"] => "/v1/policies/{name}/boundary",
        ["v1", "proposals"] => "/v1/proposals",
        ["v1", "proposals", _] => "/v1/proposals/{id}",
        ["v1", "proposals", _, "approve"] => "/v1/proposals/{id}/approve",
        ["v1", "proposals", _, "reject"] => "/v1/proposals/{id}/reject",
        ["v1", "sandboxes"] => "/v1/sandboxes",
        ["v1", "sandboxes", _] => "/v1/sandboxes/{id}",
        ["v1", "sandboxes", _, "bundle"] => "/v1/sandboxes/{id}/bundle",
        ["v1", "sandboxes", _, "status"] => "/v1/sandboxes/{id}/status",
        ["v1", "sandboxes", _, "proposals"] => "/v1/sandboxes/{id}/proposals",
        ["v1", "sandboxes", _, "token"] => "/v1/sandboxes/{id}/token",
        ["v1", "sandboxes", _, "stop"] => "/v1/sandboxes/{id}/stop",
        ["v1", "sandboxes", _, "start"] => "/v1/sandboxes/{id}/start",
        ["v1", "sandboxes", _, "session"] => "/v1/sandboxes/{id}/session",
        ["v1", "sandboxes", _, "execs"] => "/v1/sandboxes/{id}/execs",
        ["v1", "sandboxes", _, "execs", "next"] => "/v1/sandboxes/{id}/execs/next",
        ["v1", "sandboxes", _, "execs", _] => "/v1/sandboxes/{id}/execs/{exec}",
        ["v1", "sandboxes", _, "execs", _, "output"] => "/v1/sandboxes/{id}/execs/{exec}/output",
        ["v1", "sandboxes", _, "execs", _, "end"] => "/v1/sandboxes/{id}/execs/{exec}/end",
        ["v1", "tokens"] => "/v1/tokens",
        ["v1", "tokens", _] => "/v1/tokens/{name}",
        ["v1", "audit"] => "/v1/audit",
        ["v1", "audit", "verify"] => "/v1/audit/verify",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_labelled_by_template_never_by_path() {
        assert_eq!(
            route_template("/v1/sandboxes/sb-1/bundle"),
            "/v1/sandboxes/{id}/bundle"
        );
        assert_eq!(
            route_template("/v1/sandboxes/sb-1/bundle/"),
            "/v1/sandboxes/{id}/bundle"
        );
        assert_eq!(route_template(&format!("/{}", "x".repeat(5000))), "other");
    }

    #[test]
    fn the_text_format_has_a_type_for_every_family_and_cumulative_buckets() {
        let m = Metrics::default();
        m.request(
            &hyper::Method::GET,
            "/healthz",
            200,
            Duration::from_millis(2),
        );
        m.request(
            &hyper::Method::GET,
            "/healthz",
            200,
            Duration::from_millis(40),
        );
        m.proof("widened", Duration::from_millis(7));
        let text = m.render(&Gauges {
            waiting: 3,
            topics: 2,
            connections: 1,
            proofs_running: 0,
        });
        assert!(text.contains(
            "openshell_gateway_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 2"
        ));
        assert!(text.contains(
            "openshell_gateway_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.001\"} 0"
        ));
        assert!(text.contains(
            "openshell_gateway_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "openshell_gateway_request_duration_seconds_bucket{route=\"/healthz\",le=\"0.05\"} 2"
        ));
        assert!(
            text.contains("openshell_gateway_proof_duration_seconds_count{verdict=\"widened\"} 1")
        );
        assert!(text.contains("openshell_gateway_waiting_polls 3"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let family = line.split(['{', ' ']).next().unwrap();
            let base = family
                .trim_end_matches("_bucket")
                .trim_end_matches("_sum")
                .trim_end_matches("_count");
            assert!(
                text.contains(&format!("# TYPE {base} ")),
                "no TYPE line for `{line}`"
            );
        }
    }
}
