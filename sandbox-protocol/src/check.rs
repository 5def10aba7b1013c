//! Each message as the receiver may use it, once checked: the binding, the
//! kind present, every number in range and every length under its limit.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU64;

use crate::pb;
use crate::{
    Binding, MAX_CHUNK, MAX_DATAGRAM, MAX_DNS, MAX_LAUNCH, MAX_LINKS, MAX_MESSAGE, MAX_PATH,
    MAX_REASON, PROTOCOL_VERSION,
};

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The bytes are not a message of the expected type.
    #[error("not a protocol message: {0}")]
    Decode(String),
    /// The encoded message is over [`MAX_MESSAGE`].
    #[error("a message of {0} bytes, over the limit of {MAX_MESSAGE}")]
    MessageTooLarge(usize),
    /// The message carries no binding.
    #[error("a message without a sandbox binding")]
    MissingBinding,
    /// The message is bound to another sandbox or generation.
    #[error("a message for sandbox `{sandbox_id}` generation {generation}, not this one")]
    WrongBinding {
        /// The id the message named (cut to the id limit).
        sandbox_id: String,
        /// The generation it named.
        generation: u64,
    },
    /// The message names no kind (none of its `oneof` is set).
    #[error("a message of no known kind")]
    NoKind,
    /// A `Hello` or `Welcome` of another protocol version.
    #[error("protocol version {0}; this side speaks version {PROTOCOL_VERSION}")]
    Version(u32),
    /// A field is missing or out of range.
    #[error("field `{field}`: {problem}")]
    Field {
        /// Which field.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A field is longer than its limit.
    #[error("field `{field}` has {len} bytes, over the limit of {max}")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// Its limit.
        max: usize,
    },
    /// A message out of its stream's order.
    #[error("out of order: {0}")]
    Order(&'static str),
}

fn field(field: &'static str, problem: &'static str) -> ProtocolError {
    ProtocolError::Field { field, problem }
}

fn limit(name: &'static str, len: usize, max: usize) -> Result<(), ProtocolError> {
    if len > max {
        return Err(ProtocolError::TooLong {
            field: name,
            len,
            max,
        });
    }
    Ok(())
}

/// Who made a trapped call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Process, as the sandbox's PID namespace numbers it.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// The executable's path, as bytes.
    pub exe: Vec<u8>,
    /// The executable has been unlinked since the exec.
    pub exe_deleted: bool,
    /// Its SHA-256 when the bundle pins a binary.
    pub exe_sha256: Option<[u8; 32]>,
    /// Why code mapped into it does not come from its identity, if so.
    pub foreign_code: Option<String>,
    /// The tree the workload may write that holds the executable, if any.
    pub writable_tree: Option<Vec<u8>>,
}

impl Caller {
    fn check(c: Option<pb::Caller>) -> Result<Self, ProtocolError> {
        let c = c.ok_or(field("caller", "missing"))?;
        if c.pid == 0 || c.tid == 0 {
            return Err(field("caller", "pid and tid are never 0"));
        }
        limit("caller.exe", c.exe.len(), MAX_PATH)?;
        if c.exe.first() != Some(&b'/') || c.exe.contains(&0) {
            return Err(field("caller.exe", "not an absolute path"));
        }
        let exe_sha256 = match c.exe_sha256.len() {
            0 => None,
            32 => {
                let mut digest = [0_u8; 32];
                digest.copy_from_slice(&c.exe_sha256);
                Some(digest)
            }
            _ => return Err(field("caller.exe_sha256", "not 32 bytes")),
        };
        limit("caller.foreign_code", c.foreign_code.len(), MAX_REASON)?;
        limit("caller.writable_tree", c.writable_tree.len(), MAX_PATH)?;
        if !c.writable_tree.is_empty()
            && (c.writable_tree.first() != Some(&b'/') || c.writable_tree.contains(&0))
        {
            return Err(field("caller.writable_tree", "not an absolute path"));
        }
        Ok(Self {
            pid: c.pid,
            tid: c.tid,
            exe: c.exe,
            exe_deleted: c.exe_deleted,
            exe_sha256,
            foreign_code: Some(c.foreign_code).filter(|r| !r.is_empty()),
            writable_tree: Some(c.writable_tree).filter(|t| !t.is_empty()),
        })
    }

    /// The caller as it goes out.
    #[must_use]
    pub fn to_pb(&self) -> pb::Caller {
        pb::Caller {
            pid: self.pid,
            tid: self.tid,
            exe: self.exe.clone(),
            exe_deleted: self.exe_deleted,
            exe_sha256: self.exe_sha256.map(|d| d.to_vec()).unwrap_or_default(),
            foreign_code: self.foreign_code.clone().unwrap_or_default(),
            writable_tree: self.writable_tree.clone().unwrap_or_default(),
        }
    }
}

fn request_id(id: u64) -> Result<NonZeroU64, ProtocolError> {
    NonZeroU64::new(id).ok_or(field("request_id", "is 0"))
}

fn endpoint(e: Option<pb::IpEndpoint>) -> Result<SocketAddr, ProtocolError> {
    let e = e.ok_or(field("destination", "missing"))?;
    let ip = match <[u8; 4]>::try_from(e.ip.as_slice()) {
        Ok(v4) => IpAddr::V4(Ipv4Addr::from(v4)),
        Err(_) => match <[u8; 16]>::try_from(e.ip.as_slice()) {
            Ok(v6) => IpAddr::V6(Ipv6Addr::from(v6)),
            Err(_) => return Err(field("destination.ip", "neither 4 nor 16 bytes")),
        },
    };
    let port = u16::try_from(e.port).map_err(|_| field("destination.port", "over 65535"))?;
    Ok(SocketAddr::new(ip, port))
}

/// The `IpEndpoint` of `addr`.
#[must_use]
pub(crate) fn endpoint_pb(addr: SocketAddr) -> pb::IpEndpoint {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    pb::IpEndpoint {
        ip,
        port: u32::from(addr.port()),
    }
}

fn transport(t: i32) -> Result<pb::Transport, ProtocolError> {
    match pb::Transport::try_from(t) {
        Ok(pb::Transport::Tcp) => Ok(pb::Transport::Tcp),
        Ok(pb::Transport::Udp) => Ok(pb::Transport::Udp),
        _ => Err(field("transport", "neither TCP nor UDP")),
    }
}

fn errno(e: i32) -> Result<i32, ProtocolError> {
    if !(1..=4095).contains(&e) {
        return Err(field("refused_errno", "not an errno (1 to 4095)"));
    }
    Ok(e)
}

fn digest(d: &str) -> Result<(), ProtocolError> {
    let hex = d
        .strip_prefix("sha256:")
        .ok_or(field("bundle_digest", "does not start with `sha256:`"))?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(field("bundle_digest", "not 64 lowercase hex digits"));
    }
    Ok(())
}

/// A checked message of the control stream, from the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromSandbox {
    /// The first message: the digest of the bundle the sandbox enforces.
    Hello {
        /// `sha256:` and 64 hex digits; `None`: the sandbox has no plan
        /// yet (it was started from a kit) and waits for its launch in
        /// the `Welcome`.
        bundle_digest: Option<String>,
    },
    /// A question to the DNS stub.
    Dns {
        /// Never 0.
        request_id: NonZeroU64,
        /// Who asks, when known (a question to the stub's UDP socket
        /// does not say which process sent it).
        caller: Option<Caller>,
        /// How the question came.
        transport: pb::Transport,
        /// The DNS message.
        packet: Vec<u8>,
    },
    /// A trapped UDP send.
    Datagram {
        /// Never 0.
        request_id: NonZeroU64,
        /// Who sends.
        caller: Caller,
        /// Where to.
        destination: SocketAddr,
        /// What.
        payload: Vec<u8>,
    },
    /// A call the sandbox refused on its own, for the deny log; nothing
    /// answers it.
    Refusal(RefusalReport),
    /// What the sandbox applied to the workload; answered by `Go`.
    Evidence(Evidence),
    /// The workload ended with this exit status; the last message.
    Ended(u8),
}

/// What the kernel says of the workload before its exec (see
/// `proto/sandbox.proto`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Evidence {
    /// The Landlock ABI the kernel offers.
    pub landlock_abi: u32,
    /// The ruleset is in force.
    pub landlock_enforced: bool,
    /// 2: filter mode.
    pub seccomp_mode: u32,
    /// The listener is held and live.
    pub listener_live: bool,
    /// Capability masks.
    pub cap_effective: u64,
    /// Capability masks.
    pub cap_permitted: u64,
    /// Capability masks.
    pub cap_ambient: u64,
    /// Capability masks.
    pub cap_bounding: u64,
    /// `NoNewPrivs`.
    pub no_new_privs: bool,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Binary names of the bundle that are links on the sandbox's host,
    /// each with the file it leads to.
    pub links: Vec<(String, String)>,
}

impl Evidence {
    /// Why a workload with this evidence must not run, if it must not:
    /// each fact the sandbox promises, and Landlock when `landlock_required`
    /// (the bundle's `landlock hard`) at ABI `min_abi` or above.
    pub fn refusal(&self, landlock_required: bool, min_abi: u32) -> Option<String> {
        let mut wrong = Vec::new();
        if !self.no_new_privs {
            wrong.push("no_new_privs is not set".to_owned());
        }
        if self.seccomp_mode != 2 {
            wrong.push(format!(
                "seccomp mode is {}, not filter (2)",
                self.seccomp_mode
            ));
        }
        if !self.listener_live {
            wrong.push("the seccomp listener is not live".to_owned());
        }
        for (set, mask) in [
            ("effective", self.cap_effective),
            ("permitted", self.cap_permitted),
            ("ambient", self.cap_ambient),
        ] {
            if mask != 0 {
                wrong.push(format!("the {set} capability set is {mask:#x}, not empty"));
            }
        }
        if (self.uid == 0 || self.euid == 0) && self.cap_bounding != 0 {
            wrong.push(format!(
                "the workload is uid 0 and its bounding set is {:#x}: an exec could regain capabilities",
                self.cap_bounding
            ));
        }
        if landlock_required && (!self.landlock_enforced || self.landlock_abi < min_abi) {
            wrong.push(format!(
                "the bundle needs Landlock ABI {min_abi} or above, enforced; the sandbox has ABI {} {}",
                self.landlock_abi,
                if self.landlock_enforced { "enforced" } else { "not enforced" }
            ));
        }
        (!wrong.is_empty()).then(|| wrong.join("; "))
    }

    fn check(e: pb::Evidence) -> Result<Self, ProtocolError> {
        let bytes = e.links.iter().map(|l| l.name.len() + l.target.len());
        limit("links", bytes.sum(), MAX_LINKS)?;
        let mut links = Vec::with_capacity(e.links.len());
        for l in e.links {
            for (name, path) in [("links.name", &l.name), ("links.target", &l.target)] {
                limit(name, path.len(), MAX_PATH)?;
                if !path.starts_with('/') {
                    return Err(field(name, "not an absolute path"));
                }
            }
            links.push((l.name, l.target));
        }
        Ok(Self {
            landlock_abi: e.landlock_abi,
            landlock_enforced: e.landlock_enforced,
            seccomp_mode: e.seccomp_mode,
            listener_live: e.listener_live,
            cap_effective: e.cap_effective,
            cap_permitted: e.cap_permitted,
            cap_ambient: e.cap_ambient,
            cap_bounding: e.cap_bounding,
            no_new_privs: e.no_new_privs,
            uid: e.uid,
            euid: e.euid,
            links,
        })
    }

    fn to_pb(&self) -> pb::Evidence {
        pb::Evidence {
            landlock_abi: self.landlock_abi,
            landlock_enforced: self.landlock_enforced,
            seccomp_mode: self.seccomp_mode,
            listener_live: self.listener_live,
            cap_effective: self.cap_effective,
            cap_permitted: self.cap_permitted,
            cap_ambient: self.cap_ambient,
            cap_bounding: self.cap_bounding,
            no_new_privs: self.no_new_privs,
            uid: self.uid,
            euid: self.euid,
            links: self
                .links
                .iter()
                .map(|(name, target)| pb::BinaryLink {
                    name: name.clone(),
                    target: target.clone(),
                })
                .collect(),
        }
    }
}

/// A call the sandbox refused without asking: who, what, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalReport {
    /// Process, as the sandbox's PID namespace numbers it.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// The executable's path, when the sandbox could read it.
    pub exe: Option<Vec<u8>>,
    /// The call (`connect`, `listen`, `sendto`...).
    pub syscall: String,
    /// `tcp`, `udp`, `unix`, or the address family.
    pub protocol: String,
    /// The destination, when it is an IP address.
    pub destination: Option<SocketAddr>,
    /// A unix socket path, or another family's description.
    pub address: Option<Vec<u8>>,
    /// Why it was refused.
    pub reason: String,
    /// A remark for the reader of the log.
    pub note: Option<String>,
}

/// The most bytes of a call's or a protocol's name in a refusal.
const MAX_NAME: usize = 32;

impl RefusalReport {
    fn check(r: pb::Refusal) -> Result<Self, ProtocolError> {
        if r.pid == 0 || r.tid == 0 {
            return Err(field("refusal", "pid and tid are never 0"));
        }
        limit("refusal.exe", r.exe.len(), MAX_PATH)?;
        if !r.exe.is_empty() && (r.exe.first() != Some(&b'/') || r.exe.contains(&0)) {
            return Err(field("refusal.exe", "not an absolute path"));
        }
        limit("refusal.syscall", r.syscall.len(), MAX_NAME)?;
        limit("refusal.protocol", r.protocol.len(), MAX_NAME)?;
        if r.syscall.is_empty() {
            return Err(field("refusal.syscall", "empty"));
        }
        limit("refusal.address", r.address.len(), MAX_PATH)?;
        limit("refusal.reason", r.reason.len(), MAX_REASON)?;
        limit("refusal.note", r.note.len(), MAX_REASON)?;
        if r.reason.is_empty() {
            return Err(field("refusal.reason", "empty"));
        }
        let destination = r.destination.map(|d| endpoint(Some(d))).transpose()?;
        Ok(Self {
            pid: r.pid,
            tid: r.tid,
            exe: Some(r.exe).filter(|e| !e.is_empty()),
            syscall: r.syscall,
            protocol: r.protocol,
            destination,
            address: Some(r.address).filter(|a| !a.is_empty()),
            reason: r.reason,
            note: Some(r.note).filter(|n| !n.is_empty()),
        })
    }

    fn to_pb(&self) -> pb::Refusal {
        pb::Refusal {
            pid: self.pid,
            tid: self.tid,
            exe: self.exe.clone().unwrap_or_default(),
            syscall: self.syscall.clone(),
            protocol: self.protocol.clone(),
            destination: self.destination.map(endpoint_pb),
            address: self.address.clone().unwrap_or_default(),
            reason: self.reason.clone(),
            note: self.note.clone().unwrap_or_default(),
        }
    }
}

impl FromSandbox {
    /// Checks `msg` against the binding `expected` and the limits.
    pub fn check(msg: pb::SandboxMessage, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::sandbox_message::Kind;
        expected.check(msg.binding.as_ref())?;
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Hello(h) => {
                if h.protocol_version != PROTOCOL_VERSION {
                    return Err(ProtocolError::Version(h.protocol_version));
                }
                let bundle_digest = Some(h.bundle_digest).filter(|d| !d.is_empty());
                bundle_digest.as_deref().map(digest).transpose()?;
                Ok(Self::Hello { bundle_digest })
            }
            Kind::Dns(d) => {
                limit("packet", d.packet.len(), MAX_DNS)?;
                if d.packet.is_empty() {
                    return Err(field("packet", "empty"));
                }
                Ok(Self::Dns {
                    request_id: request_id(d.request_id)?,
                    caller: d.caller.map(|c| Caller::check(Some(c))).transpose()?,
                    transport: transport(d.transport)?,
                    packet: d.packet,
                })
            }
            Kind::Datagram(d) => {
                limit("payload", d.payload.len(), MAX_DATAGRAM)?;
                Ok(Self::Datagram {
                    request_id: request_id(d.request_id)?,
                    caller: Caller::check(d.caller)?,
                    destination: endpoint(d.destination)?,
                    payload: d.payload,
                })
            }
            Kind::Refusal(r) => Ok(Self::Refusal(RefusalReport::check(r)?)),
            Kind::Evidence(e) => Ok(Self::Evidence(Evidence::check(e)?)),
            Kind::Ended(e) => u8::try_from(e.exit_status)
                .map(Self::Ended)
                .map_err(|_| field("exit_status", "over 255")),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn to_pb(&self, binding: &Binding) -> pb::SandboxMessage {
        use pb::sandbox_message::Kind;
        let kind = match self {
            Self::Hello { bundle_digest } => Kind::Hello(pb::Hello {
                protocol_version: PROTOCOL_VERSION,
                bundle_digest: bundle_digest.clone().unwrap_or_default(),
            }),
            Self::Dns {
                request_id,
                caller,
                transport,
                packet,
            } => Kind::Dns(pb::DnsQuery {
                request_id: request_id.get(),
                caller: caller.as_ref().map(Caller::to_pb),
                transport: (*transport).into(),
                packet: packet.clone(),
            }),
            Self::Datagram {
                request_id,
                caller,
                destination,
                payload,
            } => Kind::Datagram(pb::DatagramRequest {
                request_id: request_id.get(),
                caller: Some(caller.to_pb()),
                destination: Some(endpoint_pb(*destination)),
                payload: payload.clone(),
            }),
            Self::Refusal(r) => Kind::Refusal(r.to_pb()),
            Self::Evidence(e) => Kind::Evidence(e.to_pb()),
            Self::Ended(status) => Kind::Ended(pb::Ended {
                exit_status: u32::from(*status),
            }),
        };
        pb::SandboxMessage {
            binding: Some(binding.to_pb()),
            kind: Some(kind),
        }
    }
}

/// What the supervisor answered to a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramVerdict {
    /// Sent: this many bytes.
    Sent(u64),
    /// Fail the send with this errno.
    Refused(i32),
}

/// A checked message of the control stream, from the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromSupervisor {
    /// The first message: the `Hello` was accepted.
    Welcome {
        /// The launch of a sandbox that waits for it (its `Hello` had no
        /// digest), at most [`MAX_LAUNCH`] bytes; opaque here, read by the
        /// sandbox. Never empty: an empty field is `None`.
        launch: Option<Vec<u8>>,
    },
    /// The `Evidence` was accepted: the workload may run.
    Go,
    /// The answer to a DNS question: the reply, or none (empty).
    Dns {
        /// The request's id.
        request_id: NonZeroU64,
        /// The reply.
        packet: Vec<u8>,
    },
    /// The answer to a datagram.
    Datagram {
        /// The request's id.
        request_id: NonZeroU64,
        /// Sent or refused.
        verdict: DatagramVerdict,
    },
    /// Run a further command; answered by an Exec stream.
    Exec(ExecRequest),
}

/// The most arguments, and the most environment entries, of a command.
pub const MAX_ARGS: usize = 256;

/// A further command the supervisor asks the sandbox to run beside the
/// workload, confined as the workload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// Never 0; each larger than the last on one control stream.
    pub exec_id: NonZeroU64,
    /// The program (a path, or a name looked up in the workload's `PATH`)
    /// and its arguments; never empty.
    pub argv: Vec<Vec<u8>>,
    /// `NAME=VALUE` entries added to the workload's environment.
    pub env: Vec<Vec<u8>>,
    /// The working directory; `None`: the workload's.
    pub workdir: Option<Vec<u8>>,
    /// Killed after this long; `None`: never.
    pub timeout: Option<std::time::Duration>,
}

impl ExecRequest {
    fn check(e: pb::ExecRequest) -> Result<Self, ProtocolError> {
        let exec_id = NonZeroU64::new(e.exec_id).ok_or(field("exec_id", "is 0"))?;
        if e.argv.is_empty() || e.argv.first().is_some_and(Vec::is_empty) {
            return Err(field("argv", "no program"));
        }
        limit("argv", e.argv.len(), MAX_ARGS)?;
        limit("env", e.env.len(), MAX_ARGS)?;
        if e.argv.iter().chain(&e.env).any(|a| a.contains(&0)) {
            return Err(field("argv", "an argument or variable with a NUL byte"));
        }
        if e.env
            .iter()
            .any(|v| v.iter().position(|&b| b == b'=').unwrap_or(0) == 0)
        {
            return Err(field("env", "an entry that is not NAME=VALUE"));
        }
        limit("workdir", e.workdir.len(), MAX_PATH)?;
        if !e.workdir.is_empty() && (e.workdir.first() != Some(&b'/') || e.workdir.contains(&0)) {
            return Err(field("workdir", "not an absolute path"));
        }
        Ok(Self {
            exec_id,
            argv: e.argv,
            env: e.env,
            workdir: Some(e.workdir).filter(|w| !w.is_empty()),
            timeout: (e.timeout_ms > 0).then(|| std::time::Duration::from_millis(e.timeout_ms)),
        })
    }

    fn to_pb(&self) -> pb::ExecRequest {
        pb::ExecRequest {
            exec_id: self.exec_id.get(),
            argv: self.argv.clone(),
            env: self.env.clone(),
            workdir: self.workdir.clone().unwrap_or_default(),
            timeout_ms: self.timeout.map_or(0, |t| {
                u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1)
            }),
        }
    }
}

impl FromSupervisor {
    /// Checks `msg` against the binding `expected` and the limits.
    pub fn check(msg: pb::SupervisorMessage, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::supervisor_message::Kind;
        expected.check(msg.binding.as_ref())?;
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Welcome(w) => {
                if w.protocol_version != PROTOCOL_VERSION {
                    return Err(ProtocolError::Version(w.protocol_version));
                }
                limit("launch", w.launch.len(), MAX_LAUNCH)?;
                Ok(Self::Welcome {
                    launch: Some(w.launch).filter(|l| !l.is_empty()),
                })
            }
            Kind::Go(pb::Go {}) => Ok(Self::Go),
            Kind::Dns(d) => {
                limit("packet", d.packet.len(), MAX_DNS)?;
                Ok(Self::Dns {
                    request_id: request_id(d.request_id)?,
                    packet: d.packet,
                })
            }
            Kind::Datagram(d) => {
                use pb::datagram_answer::Verdict;
                let verdict = match d.verdict.ok_or(field("verdict", "missing"))? {
                    Verdict::Sent(n) if n <= MAX_DATAGRAM as u64 => DatagramVerdict::Sent(n),
                    Verdict::Sent(_) => return Err(field("sent", "over the datagram limit")),
                    Verdict::RefusedErrno(e) => DatagramVerdict::Refused(errno(e)?),
                };
                Ok(Self::Datagram {
                    request_id: request_id(d.request_id)?,
                    verdict,
                })
            }
            Kind::Exec(e) => Ok(Self::Exec(ExecRequest::check(e)?)),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn to_pb(&self, binding: &Binding) -> pb::SupervisorMessage {
        use pb::supervisor_message::Kind;
        let kind = match self {
            Self::Welcome { launch } => Kind::Welcome(pb::Welcome {
                protocol_version: PROTOCOL_VERSION,
                launch: launch.clone().unwrap_or_default(),
            }),
            Self::Go => Kind::Go(pb::Go {}),
            Self::Dns { request_id, packet } => Kind::Dns(pb::DnsAnswer {
                request_id: request_id.get(),
                packet: packet.clone(),
            }),
            Self::Datagram {
                request_id,
                verdict,
            } => {
                use pb::datagram_answer::Verdict;
                Kind::Datagram(pb::DatagramAnswer {
                    request_id: request_id.get(),
                    verdict: Some(match verdict {
                        DatagramVerdict::Sent(n) => Verdict::Sent(*n),
                        DatagramVerdict::Refused(e) => Verdict::RefusedErrno(*e),
                    }),
                })
            }
            Self::Exec(e) => Kind::Exec(e.to_pb()),
        };
        pb::SupervisorMessage {
            binding: Some(binding.to_pb()),
            kind: Some(kind),
        }
    }
}

/// A checked message of a relay stream, from the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayUpKind {
    /// The stream's first message: a trapped TCP connect.
    Connect {
        /// Who connects.
        caller: Caller,
        /// Where to.
        destination: SocketAddr,
    },
    /// Bytes the workload wrote.
    Data(Vec<u8>),
    /// The workload shut its side for writing.
    ShutdownWrite,
}

impl RelayUpKind {
    /// Checks `msg` against the binding `expected` and the limits.
    pub fn check(msg: pb::RelayUp, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::relay_up::Kind;
        expected.check(msg.binding.as_ref())?;
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Connect(c) => Ok(Self::Connect {
                caller: Caller::check(c.caller)?,
                destination: endpoint(c.destination)?,
            }),
            Kind::Data(d) => {
                limit("data", d.len(), MAX_CHUNK)?;
                Ok(Self::Data(d))
            }
            Kind::ShutdownWrite(true) => Ok(Self::ShutdownWrite),
            Kind::ShutdownWrite(false) => Err(field("shutdown_write", "false")),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn to_pb(&self, binding: &Binding) -> pb::RelayUp {
        self.clone().into_pb(binding)
    }

    /// [`Self::to_pb`] without copying the data.
    #[must_use]
    pub fn into_pb(self, binding: &Binding) -> pb::RelayUp {
        use pb::relay_up::Kind;
        pb::RelayUp {
            binding: Some(binding.to_pb()),
            kind: Some(match self {
                Self::Connect {
                    caller,
                    destination,
                } => Kind::Connect(pb::ConnectRequest {
                    caller: Some(caller.to_pb()),
                    destination: Some(endpoint_pb(destination)),
                }),
                Self::Data(d) => Kind::Data(d),
                Self::ShutdownWrite => Kind::ShutdownWrite(true),
            }),
        }
    }
}

/// A checked message of a relay stream, from the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayDownKind {
    /// The first message: the supervisor holds an established upstream.
    Connected,
    /// The first and last message: the connect fails with this errno.
    Refused(i32),
    /// The first and last message: no rule allows the connect, and its
    /// loopback destination names no host, so the sandbox connects it on
    /// its own loopback.
    OwnLoopback,
    /// Bytes from upstream.
    Data(Vec<u8>),
    /// The upstream shut its side for writing.
    ShutdownWrite,
    /// The upstream failed with this errno.
    Reset(i32),
}

impl RelayDownKind {
    /// Checks `msg` against the binding `expected` and the limits.
    pub fn check(msg: pb::RelayDown, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::relay_down::Kind;
        expected.check(msg.binding.as_ref())?;
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Data(d) => {
                limit("data", d.len(), MAX_CHUNK)?;
                Ok(Self::Data(d))
            }
            Kind::ShutdownWrite(true) => Ok(Self::ShutdownWrite),
            Kind::ShutdownWrite(false) => Err(field("shutdown_write", "false")),
            Kind::ResetErrno(e) => Ok(Self::Reset(errno(e)?)),
            Kind::Connected(pb::Connected {}) => Ok(Self::Connected),
            Kind::RefusedErrno(e) => Ok(Self::Refused(errno(e)?)),
            Kind::OwnLoopback(pb::OwnLoopback {}) => Ok(Self::OwnLoopback),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn to_pb(&self, binding: &Binding) -> pb::RelayDown {
        self.clone().into_pb(binding)
    }

    /// [`Self::to_pb`] without copying the data.
    #[must_use]
    pub fn into_pb(self, binding: &Binding) -> pb::RelayDown {
        use pb::relay_down::Kind;
        pb::RelayDown {
            binding: Some(binding.to_pb()),
            kind: Some(match self {
                Self::Data(d) => Kind::Data(d),
                Self::ShutdownWrite => Kind::ShutdownWrite(true),
                Self::Reset(e) => Kind::ResetErrno(e),
                Self::Connected => Kind::Connected(pb::Connected {}),
                Self::Refused(e) => Kind::RefusedErrno(e),
                Self::OwnLoopback => Kind::OwnLoopback(pb::OwnLoopback {}),
            }),
        }
    }
}

/// A checked message of an Exec stream, from the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecUpKind {
    /// The first message: the command runs.
    Started(NonZeroU64),
    /// The first and last message: the command could not be started.
    Failed {
        /// The command's id.
        exec_id: NonZeroU64,
        /// Why.
        reason: String,
    },
    /// Bytes of its standard output.
    Stdout(Vec<u8>),
    /// Bytes of its standard error.
    Stderr(Vec<u8>),
    /// The last message: how it ended.
    Exited {
        /// 0 to 255; 128 + n for signal n.
        status: u8,
        /// Killed because its timeout passed.
        timed_out: bool,
    },
}

impl ExecUpKind {
    /// Checks `msg` against the binding `expected` and the limits.
    pub fn check(msg: pb::ExecUp, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::exec_up::Kind;
        expected.check(msg.binding.as_ref())?;
        let id = |id| NonZeroU64::new(id).ok_or(field("exec_id", "is 0"));
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Started(s) => Ok(Self::Started(id(s.exec_id)?)),
            Kind::Failed(f) => {
                limit("reason", f.reason.len(), MAX_REASON)?;
                Ok(Self::Failed {
                    exec_id: id(f.exec_id)?,
                    reason: f.reason,
                })
            }
            Kind::Stdout(d) => {
                limit("stdout", d.len(), MAX_CHUNK)?;
                Ok(Self::Stdout(d))
            }
            Kind::Stderr(d) => {
                limit("stderr", d.len(), MAX_CHUNK)?;
                Ok(Self::Stderr(d))
            }
            Kind::Exited(e) => Ok(Self::Exited {
                status: u8::try_from(e.exit_status)
                    .map_err(|_| field("exit_status", "over 255"))?,
                timed_out: e.timed_out,
            }),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn into_pb(self, binding: &Binding) -> pb::ExecUp {
        use pb::exec_up::Kind;
        pb::ExecUp {
            binding: Some(binding.to_pb()),
            kind: Some(match self {
                Self::Started(id) => Kind::Started(pb::ExecStarted { exec_id: id.get() }),
                Self::Failed { exec_id, reason } => Kind::Failed(pb::ExecFailed {
                    exec_id: exec_id.get(),
                    reason,
                }),
                Self::Stdout(d) => Kind::Stdout(d),
                Self::Stderr(d) => Kind::Stderr(d),
                Self::Exited { status, timed_out } => Kind::Exited(pb::ExecExited {
                    exit_status: u32::from(status),
                    timed_out,
                }),
            }),
        }
    }
}

/// A checked message of an Exec stream, from the supervisor: the one
/// thing it may say there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecDownKind {
    /// Kill the command now.
    Cancel,
}

impl ExecDownKind {
    /// Checks `msg` against the binding `expected`.
    pub fn check(msg: pb::ExecDown, expected: &Binding) -> Result<Self, ProtocolError> {
        use pb::exec_down::Kind;
        expected.check(msg.binding.as_ref())?;
        match msg.kind.ok_or(ProtocolError::NoKind)? {
            Kind::Cancel(true) => Ok(Self::Cancel),
            Kind::Cancel(false) => Err(field("cancel", "false")),
        }
    }

    /// The message as it goes out, bound to `binding`.
    #[must_use]
    pub fn to_pb(self, binding: &Binding) -> pb::ExecDown {
        pb::ExecDown {
            binding: Some(binding.to_pb()),
            kind: Some(match self {
                Self::Cancel => pb::exec_down::Kind::Cancel(true),
            }),
        }
    }
}

fn decode<M: prost::Message + Default>(bytes: &[u8]) -> Result<M, ProtocolError> {
    if bytes.len() > MAX_MESSAGE {
        return Err(ProtocolError::MessageTooLarge(bytes.len()));
    }
    M::decode(bytes).map_err(|e| ProtocolError::Decode(e.to_string()))
}

/// Decodes and checks an encoded control message from the sandbox, as
/// the supervisor's side of the transport does.
pub fn decode_sandbox_message(
    bytes: &[u8],
    expected: &Binding,
) -> Result<FromSandbox, ProtocolError> {
    FromSandbox::check(decode(bytes)?, expected)
}

/// Decodes and checks an encoded control message from the supervisor.
pub fn decode_supervisor_message(
    bytes: &[u8],
    expected: &Binding,
) -> Result<FromSupervisor, ProtocolError> {
    FromSupervisor::check(decode(bytes)?, expected)
}

/// Decodes and checks an encoded relay message from the sandbox.
pub fn decode_relay_up(bytes: &[u8], expected: &Binding) -> Result<RelayUpKind, ProtocolError> {
    RelayUpKind::check(decode(bytes)?, expected)
}
