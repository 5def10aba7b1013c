//! The connect broker: answers every trapped `connect`, `listen`,
//! `sendto`, `sendmsg` and `sendmmsg` of the workload.
//!
//! One thread receives notifications (the listener has a single consumer)
//! and answers everything that needs no waiting on the spot: refusals,
//! sends, local connects. What only a policy can decide, a TCP connect to
//! an IP address, is asked of the supervisor across the sandbox protocol
//! ([`AskSupervisor`]), and its answer carried out on tokio, off this thread.
//!
//! No answer is ever "continue" for a `connect`: the kernel would re-read
//! the fd and the address after our checks. See `docs/threat-model.md` for
//! the one place "continue" is used (sends inside the loopback-only
//! namespace) and why it is safe there and nowhere else.

mod ask;
mod connect;
mod listen;
mod send;

pub use ask::AskSupervisor;

pub use connect::{in_family, perform_on_own_loopback, perform_to};

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use enforcer::{ListenerEvent, Notif, SocketInfo, TrappedCall};

/// Where the workload's sockets live.
#[derive(Debug)]
pub enum NetMode {
    /// Its own namespace with only loopback (`--netns new`): a socket the
    /// workload creates can reach nothing but that loopback.
    Isolated {
        /// The namespace, to tell the workload's sockets from others.
        netns: OwnedFd,
    },
    /// The supervisor's namespace (`--netns none`): every IP connect and
    /// send is performed by the broker or refused.
    Shared {
        /// The DNS stub's UDP socket.
        stub_udp: SocketAddr,
        /// The DNS stub's TCP listener.
        stub_tcp: SocketAddr,
        /// The nameservers whose queries go to the stub.
        nameservers: Vec<IpAddr>,
    },
}

/// The workload's user, for calls performed on its behalf.
#[derive(Debug, Clone)]
pub struct Creds {
    /// Its uid.
    pub uid: libc::uid_t,
    /// Its primary group.
    pub gid: libc::gid_t,
    /// Its supplementary groups.
    pub groups: Vec<libc::gid_t>,
}

/// A refusal the broker made itself, for the deny log: what was asked
/// and why it was refused. The caller's thread and process come with the
/// call.
#[derive(Debug, Clone, Default)]
pub struct Refusal<'a> {
    /// `connect`, `listen`, `sendto`, `sendmsg`, `sendmmsg`.
    pub syscall: &'a str,
    /// `tcp`, `udp`, `unix`, or the address family.
    pub protocol: &'a str,
    /// The calling executable, when the broker has identified it.
    pub binary: Option<&'a str>,
    /// The destination address.
    pub ip: Option<IpAddr>,
    /// The destination port.
    pub port: Option<u16>,
    /// A unix socket path, or another family's description.
    pub address: Option<&'a str>,
    /// Why.
    pub reason: &'a str,
    /// A remark for the reader of the log.
    pub note: Option<&'a str>,
}

/// A TCP connect to an IP address, asked of the supervisor.
#[derive(Debug)]
pub struct TcpConnect {
    /// The workload's fd number.
    pub fd: i32,
    /// Its socket, taken from the workload.
    pub sock: OwnedFd,
    /// What kind of socket it is.
    pub info: SocketInfo,
    /// Where the workload connects to, as it wrote it.
    pub dst: SocketAddr,
}

/// What the broker needs.
#[derive(Debug)]
pub struct Broker {
    /// Decides TCP connects and writes the deny log.
    pub judge: AskSupervisor,
    /// Where the workload's sockets live.
    pub mode: NetMode,
    /// `Some` when the broker runs as another user than the workload.
    pub creds: Option<Creds>,
    /// Where calls that wait are answered.
    pub runtime: tokio::runtime::Handle,
}

/// Everything one answer needs.
#[derive(Debug, Clone)]
pub struct Call {
    listener: Arc<OwnedFd>,
    notif: Notif,
}

impl Call {
    /// The thread that made the call.
    #[must_use]
    pub fn tid(&self) -> u32 {
        self.notif.pid
    }

    /// Fails the call; an error means the call is gone, which is fine.
    pub fn fail(&self, errno: i32) {
        let _ = enforcer::respond_errno(&*self.listener, self.notif.id, errno);
    }

    /// Completes the call with 0.
    pub fn succeed(&self) {
        self.reply(0);
    }

    /// Completes the call with return value `value`.
    pub fn reply(&self, value: i64) {
        let _ = enforcer::respond_value(&*self.listener, self.notif.id, value);
    }

    /// Whether the thread still waits in this call; see the enforcer's
    /// notify docs for why every read is followed by this check.
    #[must_use]
    pub fn still_valid(&self) -> bool {
        enforcer::id_valid(&*self.listener, self.notif.id)
    }

    /// Installs `sock` at the caller's fd number `fd` (replacing what is
    /// there), close-on-exec as `cloexec` says.
    pub fn install(&self, sock: std::os::fd::BorrowedFd<'_>, fd: i32, cloexec: bool) -> i32 {
        match enforcer::addfd_setfd(&*self.listener, self.notif.id, sock, fd, cloexec) {
            Ok(_) => 0,
            Err(e) => e.raw(),
        }
    }

    /// An `int` argument as the kernel sees it (low 32 bits, signed).
    #[must_use]
    pub fn int_arg(&self, i: usize) -> i32 {
        let raw = self.notif.args.get(i).copied().unwrap_or_default();
        i32::from_ne_bytes(u32::try_from(raw & 0xffff_ffff).unwrap_or(0).to_ne_bytes())
    }

    /// A raw argument.
    #[must_use]
    pub fn arg(&self, i: usize) -> u64 {
        self.notif.args.get(i).copied().unwrap_or_default()
    }

    fn continue_unchecked(&self) {
        let _ = enforcer::respond_continue_unchecked(&*self.listener, self.notif.id);
    }
}

impl Broker {
    /// Writes one deny-log line, then refuses the call with `errno`. The
    /// line comes first: once the call returns, the workload may exit and
    /// the supervisor with it, and the caller is still there to be named.
    pub fn deny(&self, call: &Call, errno: i32, refusal: &Refusal<'_>) {
        self.judge.log_refusal(call, refusal);
        call.fail(errno);
    }

    /// Whether `sock` was created in the sandbox's namespace (not one
    /// installed from elsewhere, nor one passed in from outside).
    #[must_use]
    pub fn in_sandbox(&self, sock: &OwnedFd) -> bool {
        let NetMode::Isolated { netns } = &self.mode else {
            return false;
        };
        enforcer::socket_netns(sock.as_fd())
            .and_then(|ns| enforcer::same_namespace(ns.as_fd(), netns.as_fd()))
            .unwrap_or(false)
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
