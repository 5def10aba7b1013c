//! The DNS stub's answers: what the workload's resolver is told.
//!
//! The stub itself is openshell-sandbox's (on 127.0.0.1:53 inside the
//! workload's namespace, which its `/etc/resolv.conf` names, or an
//! ephemeral loopback port under `--netns none`); it asks [`Answerer`]
//! each question over the sandbox protocol. Upstream resolution runs in
//! the supervisor's namespace.

mod answer;
mod names;

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::config::{NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::{Resolver, TokioResolver};

pub use answer::Answerer;
pub use names::DnsPolicy;

/// The upstream resolver: `--dns-upstream`, else the host's configuration.
/// `None` when there is neither (allowed names then get `SERVFAIL`, except
/// those given with `--resolve`). The hosts file is not consulted: the
/// stub answers from DNS or from the operator, nothing else.
#[must_use]
pub fn resolver(upstream: Option<SocketAddr>) -> Option<TokioResolver> {
    let mut builder = match upstream {
        Some(at) => {
            let mut ns = NameServerConfig::udp_and_tcp(at.ip());
            for c in &mut ns.connections {
                c.port = at.port();
            }
            Resolver::builder_with_config(
                ResolverConfig::from_name_servers(vec![ns]),
                TokioRuntimeProvider::default(),
            )
        }
        None => TokioResolver::builder_tokio().ok()?,
    };
    let opts = builder.options_mut();
    opts.use_hosts_file = ResolveHosts::Never;
    opts.cache_size = 4096;
    opts.timeout = Duration::from_secs(3);
    opts.attempts = 2;
    builder.build().ok()
}
