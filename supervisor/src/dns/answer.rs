//! One DNS query in, one answer out.
//!
//! - A name no rule allows: `NXDOMAIN`, and a deny-log line.
//! - `A`/`AAAA` for an allowed name: the operator's `--resolve` addresses,
//!   else upstream through hickory (with its cache); every address given
//!   is remembered for attribution.
//! - Any other type for an allowed name: an empty answer (`NOERROR`, no
//!   data), so clients fall back to `A`/`AAAA`. Forwarding TXT, MX, SRV...
//!   would only widen what the name channel carries.
//! - Not a standard query, several questions, another class: `NOTIMP`,
//!   `FORMERR`, `REFUSED`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use hickory_resolver::TokioResolver;
use hickory_resolver::proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, AAAA};
use hickory_resolver::proto::rr::{DNSClass, Name, RData, Record, RecordType};

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
        let msg = Message::from_vec(query).ok()?;
        if msg.metadata.message_type != MessageType::Query {
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
        if msg.metadata.op_code != OpCode::Query {
            return ResponseCode::NotImp;
        }
        let [query] = msg.queries.as_slice() else {
            return ResponseCode::FormErr;
        };
        resp.add_query(query.clone());
        if query.query_class() != DNSClass::IN {
            return ResponseCode::Refused;
        }
        let qtype = query.query_type();
        let Ok(name) = policy_bundle::matcher::normalize_host(&query.name().to_ascii()) else {
            return ResponseCode::NXDomain;
        };
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
