//! One DNS query in, one answer out.
//!
//! - A name no rule allows: `NXDOMAIN`, and a deny-log line.
//! - `policy.local` (the advisor endpoint): its reserved address when the
//!   policy has an `advisor` statement, else `NXDOMAIN` and a deny-log line.
//! - `A`/`AAAA` for an allowed name: the operator's `--resolve` addresses,
//!   else upstream through hickory (with its cache); every address given
//!   is remembered for attribution.
//! - Any other type for an allowed name: an empty answer (`NOERROR`, no
//!   data), so clients fall back to `A`/`AAAA`. Forwarding TXT, MX, SRV...
//!   would only widen what the name channel carries.
//! - Not a standard query, several questions, another class, a name that
//!   is not a host name: `NOTIMP`, `FORMERR`, `REFUSED`, `NXDOMAIN`, each
//!   with a deny-log line (so does a message that is not a query at all).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use hickory_resolver::TokioResolver;
use hickory_resolver::proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, AAAA};
use hickory_resolver::proto::rr::{DNSClass, Name, RData, Record, RecordType};

use policy_bundle::{ADVISOR_ADDR, ADVISOR_HOST};

use super::names::DnsPolicy;
use crate::attribution::Attribution;
use crate::denylog::DenyLog;
use crate::policy::Swap;

/// TTL of the operator's `--resolve` answers.
const OPERATOR_TTL: u32 = 60;
/// The largest UDP answer without EDNS, and the payload we offer with it.
const PLAIN_UDP_MAX: usize = 512;
const EDNS_PAYLOAD: u16 = 1232;

#[derive(Debug)]
pub struct Answerer {
    /// The names come from the policy in force (a reload changes them).
    pub policy: Arc<Swap<DnsPolicy>>,
    pub attribution: Arc<Attribution>,
    pub resolver: Option<TokioResolver>,
    pub log: Arc<DenyLog>,
}

impl Answerer {
    /// The answer to `query` (wire format), or `None` for a message that
    /// is not even a DNS header. `udp`: keep the answer within the client's
    /// size (truncated answers make it retry over TCP).
    pub async fn answer(&self, query: &[u8], udp: bool) -> Option<Vec<u8>> {
        let Ok(msg) = Message::from_vec(query) else {
            self.log
                .dns_refused("", "", "none", "a message that is not a DNS query");
            return None;
        };
        if msg.metadata.message_type != MessageType::Query {
            self.log
                .dns_refused("", "", "none", "a DNS response sent to the stub");
            return None;
        }
        let mut resp = Message::response(msg.metadata.id, msg.metadata.op_code);
        resp.metadata.recursion_desired = msg.metadata.recursion_desired;
        resp.metadata.recursion_available = true;
        if msg.edns.is_some() {
            let mut edns = Edns::new();
            edns.set_max_payload(EDNS_PAYLOAD);
            resp.set_edns(edns);
        }
        resp.metadata.response_code = self.fill(&msg, &mut resp).await;
        let bytes = resp.to_vec().ok()?;
        let limit = usize::from(msg.max_payload()).max(PLAIN_UDP_MAX);
        if udp && bytes.len() > limit {
            let mut cut = resp.truncate();
            cut.metadata.id = msg.metadata.id;
            return cut.to_vec().ok();
        }
        Some(bytes)
    }

    async fn fill(&self, msg: &Message, resp: &mut Message) -> ResponseCode {
        // Every refusal leaves a log line: a name the stub will not look up
        // is still a channel out if nobody sees it.
        let refuse = |name: &str, qtype: &str, rcode: ResponseCode, why: &str| {
            self.log
                .dns_refused(name, qtype, &format!("{rcode:?}"), why);
            rcode
        };
        if msg.metadata.op_code != OpCode::Query {
            let why = format!(
                "opcode {:?}: only standard queries are answered",
                msg.metadata.op_code
            );
            return refuse("", "", ResponseCode::NotImp, &why);
        }
        let [query] = msg.queries.as_slice() else {
            let why = format!("{} questions: a query asks exactly one", msg.queries.len());
            return refuse("", "", ResponseCode::FormErr, &why);
        };
        resp.add_query(query.clone());
        let raw = query.name().to_ascii();
        let qtype = query.query_type();
        if query.query_class() != DNSClass::IN {
            let why = format!("class {}: only IN is answered", query.query_class());
            return refuse(&raw, &qtype.to_string(), ResponseCode::Refused, &why);
        }
        let Ok(name) = policy_bundle::matcher::normalize_host(&raw) else {
            let why = format!("`{raw}` is not a host name any rule can allow");
            return refuse(&raw, &qtype.to_string(), ResponseCode::NXDomain, &why);
        };
        if name == ADVISOR_HOST {
            return self.advisor(query, &name, resp);
        }
        if !self.policy.current().allows(&name) {
            self.log.dns_refused(
                &name,
                &qtype.to_string(),
                "NXDomain",
                &format!("no rule allows any binary to reach `{name}`"),
            );
            return ResponseCode::NXDomain;
        }
        if !matches!(qtype, RecordType::A | RecordType::AAAA) {
            return ResponseCode::NoError;
        }
        let operator = self.attribution.operator_addrs(&name);
        if !operator.is_empty() {
            self.attribution.remember(&name, operator.iter().copied());
            for ip in operator {
                if let Some(rdata) = rdata_for(qtype, ip) {
                    resp.add_answer(Record::from_rdata(
                        query.name().clone(),
                        OPERATOR_TTL,
                        rdata,
                    ));
                }
            }
            return ResponseCode::NoError;
        }
        self.upstream(query, &name, resp).await
    }

    /// `policy.local`: the reserved address for `A` when the policy has
    /// an `advisor` statement (IPv4 only: `AAAA` and other types get an
    /// empty answer, so clients fall back to `A`), else `NXDOMAIN` like any
    /// name no rule allows. Never asked upstream or of `--resolve`: the
    /// name is the supervisor's own.
    fn advisor(&self, query: &Query, name: &str, resp: &mut Message) -> ResponseCode {
        let qtype = query.query_type();
        if !self.policy.current().advisor() {
            self.log.dns_refused(
                name,
                &qtype.to_string(),
                "NXDomain",
                &format!(
                    "the policy has no `advisor` statement: `{name}` does not exist in this sandbox"
                ),
            );
            return ResponseCode::NXDomain;
        }
        if qtype == RecordType::A {
            self.attribution.remember(name, [IpAddr::V4(ADVISOR_ADDR)]);
            resp.add_answer(Record::from_rdata(
                query.name().clone(),
                OPERATOR_TTL,
                RData::A(A(ADVISOR_ADDR)),
            ));
        }
        ResponseCode::NoError
    }

    async fn upstream(&self, query: &Query, name: &str, resp: &mut Message) -> ResponseCode {
        let Some(resolver) = &self.resolver else {
            return ResponseCode::ServFail;
        };
        let Ok(mut fqdn) = Name::from_ascii(name) else {
            return ResponseCode::NXDomain;
        };
        fqdn.set_fqdn(true);
        match resolver.lookup(fqdn, query.query_type()).await {
            Ok(lookup) => {
                let left = lookup
                    .valid_until()
                    .saturating_duration_since(Instant::now())
                    .as_secs();
                let ttl = u32::try_from(left).unwrap_or(u32::MAX).max(1);
                let mut addrs = Vec::new();
                for record in lookup.answers() {
                    let ip = match &record.data {
                        RData::A(a) => Some(IpAddr::V4(a.0)),
                        RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                        RData::CNAME(_) => None,
                        _ => continue,
                    };
                    addrs.extend(ip);
                    let mut record = record.clone();
                    record.ttl = record.ttl.min(ttl);
                    resp.add_answer(record);
                }
                self.attribution.remember(name, addrs);
                ResponseCode::NoError
            }
            Err(e) if e.is_nx_domain() => ResponseCode::NXDomain,
            Err(e) if e.is_no_records_found() => ResponseCode::NoError,
            Err(_) => ResponseCode::ServFail,
        }
    }
}

fn rdata_for(qtype: RecordType, ip: IpAddr) -> Option<RData> {
    match (qtype, ip) {
        (RecordType::A, IpAddr::V4(v4)) => Some(RData::A(A(v4))),
        (RecordType::AAAA, IpAddr::V6(v6)) => Some(RData::AAAA(AAAA(v6))),
        (RecordType::A, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(|v4| RData::A(A(v4))),
        (RecordType::AAAA, IpAddr::V4(_)) => None,
        _ => None,
    }
}
