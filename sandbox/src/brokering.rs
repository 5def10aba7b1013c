//! The sandbox brokering the workload's trapped calls itself, as a plan
//! with a relay asks: it attaches to the supervisor over the channel it
//! inherited (`--relay-fd`), serves the workload's seccomp listener with
//! the supervisor deciding its TCP connects, and the DNS stub
//! ([`crate::dns_stub`]).
//!
//! In a network namespace of its own (`--netns new`) the broker takes
//! every socket created in it for the sandbox's own; sharing the host's
//! (`--netns none`), no socket is, and the workload's DNS goes to the
//! stub by the broker's redirection.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use sandbox_protocol::Binding;
use sandbox_protocol::transport::Link;

use crate::broker::{self, AskSupervisor, Broker, Creds, NetMode};
use crate::caller::Identify;
use crate::dns_stub;

use crate::plan::{PlanUser, RelayPlan};
use crate::relay::{Attached, RelayError, Supervisor};
use crate::writable::Writable;

/// Why the sandbox could not attach to the supervisor or start brokering.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AttachError(String);

impl AttachError {
    /// An error saying `why`.
    #[must_use]
    pub fn new(why: impl Into<String>) -> Self {
        Self(why.into())
    }
}

/// The thread the relay runs on, until dropped.
#[derive(Debug)]
pub struct Relaying {
    handle: tokio::runtime::Handle,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// How long the supervisor has to close the stream once told the workload
/// ended.
const ENDED_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

impl Relaying {
    /// Tells `supervisor` the workload ended with `code`, the last message
    /// after every refusal reported before it, and waits until the
    /// supervisor has closed the stream: whatever the sandbox reported is
    /// in the deny log before the sandbox exits.
    pub fn report_ended(&self, supervisor: &Attached, code: u8) -> Result<(), RelayError> {
        let last = supervisor.current();
        self.handle.block_on(last.report_ended(code, ENDED_WITHIN))
    }
}

/// Attaches to the supervisor on the inherited descriptor `fd` and starts
/// serving `listener` on a thread of its own. The relay (the channel, its
/// streams, the pumps) runs on one thread of its own too: a connect then
/// crosses from the broker's thread to it once, and nothing crosses
/// between the relay's own tasks.
pub fn start(
    relay: &RelayPlan,
    fd: i32,
    listener: OwnedFd,
    writable: Writable,
    user: Option<&PlanUser>,
) -> Result<(Relaying, Attached), AttachError> {
    let sock = enforcer::signals::take_inherited_fd(fd).map_err(|e| attach(&e))?;
    let channel = std::os::unix::net::UnixStream::from(sock);
    channel.set_nonblocking(true).map_err(|e| attach(&e))?;
    let (handle, relaying) = relay_thread()?;
    let binding = Binding {
        sandbox_id: relay.sandbox_id.clone(),
        generation: relay.generation,
    };
    let digest = relay.bundle_digest.clone();
    let supervisor = handle
        .block_on(handle.spawn(async move {
            let io = tokio::net::UnixStream::from_std(channel)?;
            Supervisor::attach(io, Link::Local, binding, Some(digest)).await
        }))
        .map_err(|e| attach(&e))?
        .map_err(|e| attach(&e))?;
    let attached = Attached::new(supervisor);
    serve_calls(relay, &attached, &handle, listener, writable, user)?;
    Ok((relaying, attached))
}

fn attach(e: &dyn std::fmt::Display) -> AttachError {
    AttachError(e.to_string())
}

/// A current-thread runtime on a thread named `relay`, running until the
/// [`Relaying`] is dropped.
pub fn relay_thread() -> Result<(tokio::runtime::Handle, Relaying), AttachError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| attach(&e))?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("relay".into())
        .spawn(move || runtime.block_on(async move { drop(stopped.await) }))
        .map_err(|e| attach(&e))?;
    Ok((
        handle.clone(),
        Relaying {
            handle,
            _stop: stop,
        },
    ))
}

/// With `supervisor` attached (on `handle`'s runtime): starts the DNS stub
/// and serves `listener`, the workload's trapped calls, on a thread of its
/// own. Returns the broker, which serves further commands' calls too.
pub fn serve_calls(
    relay: &RelayPlan,
    supervisor: &Attached,
    handle: &tokio::runtime::Handle,
    listener: OwnedFd,
    writable: Writable,
    user: Option<&PlanUser>,
) -> Result<Arc<Broker>, AttachError> {
    // The stub listens before the workload may run: its first question
    // is answered.
    let own_network = relay.own_network;
    let for_stub = supervisor.clone();
    let (stub_udp, stub_tcp) = handle
        .block_on(handle.spawn(async move {
            let (udp, tcp) = dns_stub::bind(own_network).await?;
            let stub = (udp.local_addr()?, tcp.local_addr()?);
            dns_stub::serve(udp, tcp, for_stub);
            Ok::<_, RelayError>(stub)
        }))
        .map_err(|e| attach(&e))?
        .map_err(|e| attach(&e))?;
    let own = enforcer::own_ids();
    let creds = user.filter(|u| (u.uid, u.gid) != own).map(|u| Creds {
        uid: u.uid,
        gid: u.gid,
        groups: u.groups.clone(),
    });
    let mode = if own_network {
        let netns = std::fs::File::open("/proc/self/ns/net").map_err(|e| attach(&e))?;
        NetMode::Isolated {
            netns: OwnedFd::from(netns),
        }
    } else {
        NetMode::Shared {
            stub_udp,
            stub_tcp,
            nameservers: dns_stub::host_nameservers(),
        }
    };
    let broker = Arc::new(Broker {
        judge: AskSupervisor {
            supervisor: supervisor.clone(),
            identify: Identify::new(Some(writable), relay.hash_binaries),
        },
        mode,
        creds,
        runtime: handle.clone(),
    });
    let serving = Arc::clone(&broker);
    std::thread::Builder::new()
        .name("broker".into())
        .spawn(move || broker::serve(&serving, listener))
        .map_err(|e| attach(&e))?;
    Ok(broker)
}
