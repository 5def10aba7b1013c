//! The connect broker: answers every trapped `connect`, `sendto`,
//! `sendmsg` and `sendmmsg` of the workload.
//!
//! One thread receives notifications (the listener has a single consumer)
//! and answers everything that needs no waiting on the spot: refusals,
//! sends, local connects. A connection to an allowed destination is opened
//! on the tokio runtime, which installs the socket once it is established.
//!
//! No answer is ever "continue" for a `connect`: the kernel would re-read
//! the fd and the address after our checks. See `docs/threat-model.md` for
//! the one place "continue" is used (sends inside the loopback-only
//! namespace) and why it is safe there and nowhere else.

pub mod aliases;

mod connect;
mod listen;
mod send;
mod upstream;

pub(crate) use upstream::{Who, open_route};

use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;

use enforcer::{ListenerEvent, Notif, TrappedCall};

use crate::decide::Decider;
use crate::denylog::{DenyLog, NetEvent, tgid_of};
use crate::handoff::ProxyHandoff;

/// Where the workload's sockets live.
#[derive(Debug)]
pub enum NetMode {
    /// Its own namespace with only loopback (`--netns new`): a socket the
    /// workload creates can reach nothing but that loopback.
    Isolated {
        /// The namespace, to tell the workload's sockets from ours.
        netns: OwnedFd,
    },
    /// The supervisor's namespace (`--netns none`): every IP connect and
    /// send is performed by the supervisor or refused.
    Shared {
        /// The DNS stub, and the nameservers whose queries go to it.
        stub_udp: SocketAddr,
        stub_tcp: SocketAddr,
        nameservers: Vec<IpAddr>,
    },
}

/// The workload's user, for calls performed on its behalf.
#[derive(Debug, Clone)]
pub struct Creds {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
}

#[derive(Debug)]
pub struct Broker {
    pub decider: Arc<Decider>,
    pub log: Arc<DenyLog>,
    pub mode: NetMode,
    /// `Some` when the supervisor runs as another user than the workload.
    pub creds: Option<Creds>,
    /// The L7 proxy, once there is one.
    pub proxy: Option<Arc<dyn ProxyHandoff>>,
    pub runtime: tokio::runtime::Handle,
}

/// Everything one answer needs.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub listener: Arc<OwnedFd>,
    pub notif: Notif,
}

impl Call {
    pub fn tid(&self) -> u32 {
        self.notif.pid
    }

    /// Fails the call; an error means the call is gone, which is fine.
    pub fn fail(&self, errno: i32) {
        let _ = enforcer::respond_errno(&*self.listener, self.notif.id, errno);
    }

    pub fn succeed(&self) {
        self.reply(0);
    }

    /// Completes the call with return value `value`.
    pub fn reply(&self, value: i64) {
        let _ = enforcer::respond_value(&*self.listener, self.notif.id, value);
    }

    /// Whether the thread still waits in this call; see the enforcer's
    /// notify docs for why every read is followed by this check.
    pub fn still_valid(&self) -> bool {
        enforcer::id_valid(&*self.listener, self.notif.id)
    }

    /// An `int` argument as the kernel sees it (low 32 bits, signed).
    pub fn int_arg(&self, i: usize) -> i32 {
        let raw = self.notif.args.get(i).copied().unwrap_or_default();
        i32::from_ne_bytes(u32::try_from(raw & 0xffff_ffff).unwrap_or(0).to_ne_bytes())
    }

    pub fn arg(&self, i: usize) -> u64 {
        self.notif.args.get(i).copied().unwrap_or_default()
    }
}

impl Broker {
    /// Writes one deny-log line, then refuses the call with `errno`. The
    /// line comes first: once the call returns, the workload may exit and
    /// the supervisor with it, and the caller is still there to be named.
    pub(crate) fn deny(&self, call: &Call, errno: i32, event: NetEvent<'_>) {
        let binary = match event.binary {
            Some(_) => None,
            None => self.decider.identify(call.tid()).ok(),
        };
        self.log.network(&NetEvent {
            denied: true,
            tid: call.tid(),
            pid: tgid_of(call.tid()),
            binary: event.binary.or(binary.as_ref().map(|b| b.path.as_str())),
            ..event
        });
        call.fail(errno);
    }

    pub(crate) fn isolated_netns(&self) -> Option<&OwnedFd> {
        match &self.mode {
            NetMode::Isolated { netns } => Some(netns),
            NetMode::Shared { .. } => None,
        }
    }
}

/// Serves the listener until no process uses the filter any more. Run it
/// on its own thread.
pub fn serve(broker: &Arc<Broker>, listener: OwnedFd) {
    let listener = Arc::new(listener);
    loop {
        match enforcer::wait_listener(&*listener, None) {
            Ok(ListenerEvent::Ready) => {}
            Ok(ListenerEvent::Closed) => return,
            Ok(ListenerEvent::TimedOut) => continue,
            Err(e) if e.raw() == libc::EINTR => continue,
            Err(_) => return,
        }
        let notif = match enforcer::recv(&*listener) {
            Ok(n) => n,
            // The trapped thread went away between poll and recv.
            Err(e) if matches!(e.raw(), libc::ENOENT | libc::EINTR) => continue,
            Err(_) => return,
        };
        let call = Call {
            listener: Arc::clone(&listener),
            notif,
        };
        match notif.call() {
            Some(TrappedCall::Connect) => connect::handle(broker, call),
            Some(TrappedCall::Listen) => listen::handle(broker, &call),
            Some(send) => send::handle(broker, &call, send),
            None => call.fail(libc::ENOSYS),
        }
    }
}
