//! The supervisor as the broker's judge ([`sandbox::broker::Judge`]) when
//! it holds the workload's listener itself: it decides each TCP connect
//! with the policy in force and connects allowed ones from its own
//! namespace ([`upstream`]), through the L7 proxy where the route is
//! inspected.
//!
//! | TCP connect | answer |
//! |---|---|
//! | to a host nameserver, port 53 (`--netns none`) | connected to the stub |
//! | a route allows it, the caller's code is its own | connected, installed |
//! | refused, loopback, not a named host, the sandbox's own socket | performed on its own loopback |
//! | refused | `ECONNREFUSED` + log |

pub mod aliases;

mod upstream;

pub(crate) use upstream::{Who, open_route};

use std::sync::Arc;

use policy_bundle::matcher::canonical_ip;
use sandbox::broker::{Broker, Call, Judge, NetMode, Refusal, TcpConnect};

use crate::decide::Decider;
use crate::denylog::{DenyLog, NetEvent};
use crate::handoff::ProxyHandoff;
use enforcer::tgid_of;
use upstream::Target;

/// Decides with the policy in force and connects from this process.
#[derive(Debug)]
pub struct Connector {
    pub decider: Arc<Decider>,
    pub log: Arc<DenyLog>,
    /// The L7 proxy, once there is one.
    pub proxy: Option<Arc<dyn ProxyHandoff>>,
    pub runtime: tokio::runtime::Handle,
}

impl Judge for Connector {
    fn tcp_connect(broker: &Arc<Broker<Self>>, call: Call, c: TcpConnect) {
        let me = &broker.judge;
        let ip = canonical_ip(c.dst.ip());
        let port = c.dst.port();
        if let NetMode::Shared {
            stub_tcp,
            nameservers,
            ..
        } = &broker.mode
            && port == 53
            && nameservers.contains(&ip)
        {
            return upstream::broker(me, call, &c, Target::Stub(*stub_tcp));
        }
        let binary = me.decider.identify(call.tid());
        if !call.still_valid() {
            return;
        }
        let refuse = |reason: &str, binary: Option<&str>, host: Option<&str>| {
            me.log.network(&NetEvent {
                denied: true,
                tid: call.tid(),
                pid: tgid_of(call.tid()),
                binary,
                syscall: "connect",
                protocol: "tcp",
                host,
                ip: Some(ip),
                port: Some(port),
                reason,
                ..NetEvent::default()
            });
            call.fail(libc::ECONNREFUSED);
        };
        let Ok(binary) = binary else {
            return refuse("the calling binary cannot be identified", None, None);
        };
        let decision = me.decider.decide(&binary, ip, port);
        if decision.allowed() {
            if let Some(why) = me
                .decider
                .planted_program(&binary, ip, port)
                .or_else(|| me.decider.foreign_code(call.tid(), &binary))
            {
                if call.still_valid() {
                    refuse(&why, Some(&binary.path), decision.host.as_deref());
                }
                return;
            }
            let target = Target::Route { binary, decision };
            return upstream::broker(me, call, &c, target);
        }
        let local = ip.is_loopback() && (decision.host.is_none() || port == 53);
        if local && broker.in_sandbox(&c.sock) {
            return sandbox::broker::perform_on_own_loopback(
                broker,
                call,
                c.sock,
                c.dst,
                binary.path,
            );
        }
        refuse(
            &decision.conn.reason.to_string(),
            Some(&binary.path),
            decision.host.as_deref(),
        );
    }

    fn log_refusal(&self, call: &Call, r: &Refusal<'_>) {
        let identified = match r.binary {
            Some(_) => None,
            None => self.decider.identify(call.tid()).ok(),
        };
        self.log.network(&NetEvent {
            denied: true,
            tid: call.tid(),
            pid: tgid_of(call.tid()),
            binary: r.binary.or(identified.as_ref().map(|b| b.path.as_str())),
            syscall: r.syscall,
            protocol: r.protocol,
            ip: r.ip,
            port: r.port,
            address: r.address,
            reason: r.reason,
            note: r.note,
            ..NetEvent::default()
        });
    }
}
