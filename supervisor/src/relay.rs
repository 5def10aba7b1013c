//! The supervisor's side of the sandbox protocol (`docs/sandbox-protocol.md`):
//! it decides each connect the sandbox reports with the policy in force,
//! opens the upstream connection itself (through the L7 proxy for an
//! inspected route), and relays the connection's bytes over the stream the
//! question came on.
//!
//! The sandbox reports facts about the caller (executable, pin hash,
//! foreign code, the writable tree that holds it), which decide with the
//! destination: a deleted executable, foreign code, or a program in a
//! writable tree that only an unpinned rule allows is refused. Every
//! refusal is a deny-log line.

use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use policy_bundle::matcher::canonical_ip;
use sandbox_protocol::pb;
use sandbox_protocol::transport::Link;
use sandbox_protocol::{
    Binding, Caller, ControlOrder, FromSandbox, FromSupervisor, MAX_CHUNK, ProtocolError,
    RefusalReport, RelayDownKind, RelayOrder, RelayUpKind,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::broker::{Connector, Upstream, Who, open_route};
use crate::commands::{Commands, Control};
use crate::decide::Binary;
use crate::denylog::{DenyLog, NetEvent};
use crate::dns::Answerer;

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Answers in flight on the control stream before the sandbox must read.
const CONTROL_QUEUE: usize = 64;
/// Relay chunks in flight downward: with [`MAX_CHUNK`] each, what one
/// connection buffers here before its upstream is no longer read.
const RELAY_QUEUE: usize = 4;

/// Set once the supervisor can decide; relay streams wait for it. The
/// greeting does not: the sandbox attaches before the workload may run,
/// and the decision indexes are built once it runs.
pub(crate) type Deciding = Arc<tokio::sync::SetOnce<Arc<Connector>>>;

/// The `Broker` service for one attached sandbox.
#[derive(Debug)]
pub struct SupervisorSide {
    broker: Deciding,
    log: Arc<DenyLog>,
    /// The DNS stub's answers, for the sandbox's questions.
    answerer: Arc<Answerer>,
    binding: Binding,
    bundle_digest: String,
    /// The sandbox's Hello was accepted: relay streams are served.
    greeted: Arc<AtomicBool>,
    /// What the sandbox's Evidence must show; `None`: none is asked for
    /// (a local run, whose launch the supervisor watched itself).
    evidence: Option<EvidenceRule>,
    /// The Evidence was accepted.
    went: Arc<AtomicBool>,
    /// Where the binary links an accepted Evidence reports are put in
    /// force.
    links_to: Option<Arc<crate::reload::Reloader>>,
    /// The workload's exit status, once the sandbox reported it.
    ended: Arc<Mutex<Option<u8>>>,
    /// Made once the Evidence is accepted and the workload told to go.
    ready_file: Option<std::path::PathBuf>,
    /// Further commands, asked once the workload was told to go.
    commands: Option<Arc<Commands>>,
    /// The launch for a sandbox started from a kit, which waits for it.
    launch: Option<Arc<[u8]>>,
}

/// What a sandbox's Evidence must show before its workload may run.
#[derive(Debug, Clone, Copy)]
pub struct EvidenceRule {
    /// The bundle's `landlock hard`: a ruleset in force is required.
    pub landlock_hard: bool,
    /// The lowest Landlock ABI it accepts.
    pub min_abi: u32,
}

impl SupervisorSide {
    /// Serves the sandbox `binding`, which must enforce the bundle of
    /// `bundle_digest`.
    #[must_use]
    pub(crate) fn new(
        broker: Deciding,
        log: Arc<DenyLog>,
        answerer: Arc<Answerer>,
        binding: Binding,
        bundle_digest: String,
    ) -> Self {
        Self {
            broker,
            log,
            answerer,
            binding,
            bundle_digest,
            greeted: Arc::default(),
            evidence: None,
            went: Arc::default(),
            links_to: None,
            ended: Arc::default(),
            ready_file: None,
            commands: None,
            launch: None,
        }
    }

    /// Hands `launch` to a sandbox whose Hello waits for one (it was
    /// started from a kit, with no plan); without it such a sandbox is
    /// refused.
    #[must_use]
    pub fn launching(mut self, launch: Arc<[u8]>) -> Self {
        self.launch = Some(launch);
        self
    }

    /// Runs the further commands of `commands` on this attachment once its
    /// workload was told to go.
    #[must_use]
    pub(crate) fn running_commands(mut self, commands: Arc<Commands>) -> Self {
        self.commands = Some(commands);
        self
    }

    /// Where the workload's exit status appears once the sandbox reports
    /// it.
    pub(crate) fn workload_status(&self) -> Arc<Mutex<Option<u8>>> {
        Arc::clone(&self.ended)
    }

    /// Requires the sandbox's Evidence, judged by `rule`, before anything
    /// but the greeting: a sandbox started on its own, whose launch this
    /// supervisor did not watch.
    #[must_use]
    pub(crate) fn requiring_evidence(mut self, rule: EvidenceRule) -> Self {
        self.evidence = Some(rule);
        self
    }

    /// Makes `path` once the Evidence is accepted, for whoever waits for
    /// the workload to run (a driver).
    #[must_use]
    pub(crate) fn announcing_ready_at(mut self, path: Option<std::path::PathBuf>) -> Self {
        self.ready_file = path;
        self
    }

    /// Puts the binary links of each accepted Evidence in force through
    /// `reloader`, before the workload may run.
    #[must_use]
    pub(crate) fn with_links_to(mut self, reloader: Arc<crate::reload::Reloader>) -> Self {
        self.links_to = Some(reloader);
        self
    }
}

#[tonic::async_trait]
impl pb::broker_server::Broker for SupervisorSide {
    type ControlStream = Out<pb::SupervisorMessage>;
    type RelayStream = Out<pb::RelayDown>;
    type ExecStream = Out<pb::ExecDown>;

    async fn exec(
        &self,
        request: Request<Streaming<pb::ExecUp>>,
    ) -> Result<Response<Self::ExecStream>, Status> {
        let Some(commands) = self.commands.clone() else {
            return Err(Status::failed_precondition(
                "this supervisor asks for no further commands",
            ));
        };
        if !self.went.load(Ordering::SeqCst) {
            return Err(Status::failed_precondition(
                "an Exec stream before the workload was let run",
            ));
        }
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(commands.serve(request.into_inner(), self.binding.clone(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn control(
        &self,
        request: Request<Streaming<pb::SandboxMessage>>,
    ) -> Result<Response<Self::ControlStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(CONTROL_QUEUE);
        let log = Arc::clone(&self.log);
        let answerer = Arc::clone(&self.answerer);
        let binding = self.binding.clone();
        let digest = self.bundle_digest.clone();
        let greeted = Arc::clone(&self.greeted);
        let (rule, went) = (self.evidence, Arc::clone(&self.went));
        let ready_file = self.ready_file.clone();
        let links_to = self.links_to.clone();
        let ended = Arc::clone(&self.ended);
        let commands = self.commands.clone();
        let launch = self.launch.clone();
        tokio::spawn(async move {
            let order = Arc::new(Mutex::new(ControlOrder::new()));
            // Commands asked on this stream are not started once it ends.
            let _detach = commands.clone().map(|c| Detach(c, tx.clone()));
            loop {
                let msg = match incoming.next().await {
                    Some(Ok(msg)) => msg,
                    Some(Err(status)) => {
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                    None => return,
                };
                let checked = FromSandbox::check(msg, &binding).and_then(|m| {
                    order
                        .lock()
                        .map_err(|_| ProtocolError::Order("the stream's state is lost"))?
                        .request(&m)
                        .map(|()| m)
                });
                let early = rule.is_some()
                    && !went.load(Ordering::SeqCst)
                    && matches!(
                        checked,
                        Ok(FromSandbox::Dns { .. } | FromSandbox::Datagram { .. })
                    );
                let checked = if early {
                    Err(ProtocolError::Order(
                        "a request before the Evidence was accepted",
                    ))
                } else {
                    checked
                };
                let answer = match checked {
                    Err(e) => {
                        refused_message(&log, &e.to_string());
                        let _ = tx.send(Err(Status::invalid_argument(e.to_string()))).await;
                        return;
                    }
                    Ok(FromSandbox::Evidence(evidence)) => {
                        let rule = rule.unwrap_or(EvidenceRule {
                            landlock_hard: false,
                            min_abi: 0,
                        });
                        if let Some(why) = evidence.refusal(rule.landlock_hard, rule.min_abi) {
                            let why = format!("the workload must not run: {why}");
                            refused_message(&log, &why);
                            let _ = tx.send(Err(Status::failed_precondition(why))).await;
                            return;
                        }
                        crate::notes::note(&format!(
                            "the sandbox's evidence: Landlock ABI {} ({}), seccomp filter with a live listener, no capabilities, no_new_privs, uid {}",
                            evidence.landlock_abi,
                            if evidence.landlock_enforced {
                                "enforced"
                            } else {
                                "not available"
                            },
                            evidence.uid
                        ));
                        if let Some(reloader) = &links_to {
                            reloader.use_links(evidence.links).await;
                        }
                        went.store(true, Ordering::SeqCst);
                        if let Some(path) = &ready_file
                            && let Err(e) = std::fs::write(path, b"")
                        {
                            crate::notes::note(&format!(
                                "cannot make the ready file `{}`: {e}",
                                path.display()
                            ));
                        }
                        FromSupervisor::Go
                    }
                    Ok(FromSandbox::Hello { bundle_digest }) => {
                        match welcome(bundle_digest.as_deref(), &digest, launch.as_ref()) {
                            Ok(welcome) => {
                                greeted.store(true, Ordering::SeqCst);
                                welcome
                            }
                            Err(why) => {
                                refused_message(&log, &why);
                                let _ = tx.send(Err(Status::failed_precondition(why))).await;
                                return;
                            }
                        }
                    }
                    // Answered off this loop: a lookup may wait on the
                    // upstream resolver.
                    Ok(FromSandbox::Dns {
                        request_id,
                        transport,
                        packet,
                        ..
                    }) => {
                        let answers = Answers {
                            tx: tx.clone(),
                            order: Arc::clone(&order),
                            binding: binding.clone(),
                        };
                        let answerer = Arc::clone(&answerer);
                        tokio::spawn(async move {
                            let udp = transport == pb::Transport::Udp;
                            let packet = answerer.answer(&packet, udp).await.unwrap_or_default();
                            answers
                                .send(FromSupervisor::Dns { request_id, packet })
                                .await;
                        });
                        continue;
                    }
                    Ok(FromSandbox::Refusal(r)) => {
                        log_refusal(&log, &r);
                        continue;
                    }
                    Ok(FromSandbox::Ended(status)) => {
                        if let Ok(mut e) = ended.lock() {
                            *e = Some(status);
                        }
                        // Nothing follows: the stream ends here.
                        return;
                    }
                    // UDP leaves the sandbox only as DNS, asked of the stub.
                    Ok(FromSandbox::Datagram {
                        request_id,
                        caller,
                        destination,
                        ..
                    }) => {
                        let binary = String::from_utf8_lossy(&caller.exe);
                        log.network(&NetEvent {
                            denied: true,
                            tid: caller.tid,
                            pid: caller.pid,
                            binary: Some(&binary),
                            syscall: "sendto",
                            protocol: "udp",
                            ip: Some(canonical_ip(destination.ip())),
                            port: Some(destination.port()),
                            reason: "UDP goes only to the sandbox's DNS stub",
                            ..NetEvent::default()
                        });
                        FromSupervisor::Datagram {
                            request_id,
                            verdict: sandbox_protocol::DatagramVerdict::Refused(libc::EACCES),
                        }
                    }
                };
                let recorded = order.lock().is_ok_and(|mut o| o.answer(&answer).is_ok());
                if !recorded || tx.send(Ok(answer.to_pb(&binding))).await.is_err() {
                    return;
                }
                if let (FromSupervisor::Go, Some(commands)) = (&answer, &commands) {
                    commands.attach(Control {
                        tx: tx.clone(),
                        order: Arc::clone(&order),
                    });
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn relay(
        &self,
        request: Request<Streaming<pb::RelayUp>>,
    ) -> Result<Response<Self::RelayStream>, Status> {
        if !self.greeted.load(Ordering::SeqCst) {
            let why = "a relay stream before the sandbox's Hello was accepted";
            refused_message(&self.log, why);
            return Err(Status::failed_precondition(why));
        }

        let mut incoming = request.into_inner();
        let binding = self.binding.clone();
        let mut order = RelayOrder::new();
        let first = match incoming.next().await {
            Some(Ok(msg)) => RelayUpKind::check(msg, &binding)
                .and_then(|m| order.up(&m).map(|()| m))
                .map_err(|e| Status::invalid_argument(e.to_string()))?,
            Some(Err(status)) => return Err(status),
            None => {
                return Err(Status::invalid_argument(
                    "a relay stream without its connect",
                ));
            }
        };
        let RelayUpKind::Connect {
            caller,
            destination,
        } = first
        else {
            return Err(Status::invalid_argument(
                "a relay stream without its connect",
            ));
        };
        // Judged at the question, not the stream's opening: the sandbox
        // opens streams ahead, before its Evidence is answered.
        if self.evidence.is_some() && !self.went.load(Ordering::SeqCst) {
            let why = "a connect before the sandbox's Evidence was accepted";
            refused_message(&self.log, why);
            return Err(Status::failed_precondition(why));
        }
        let (tx, rx) = mpsc::channel(RELAY_QUEUE);
        let broker = self.broker.wait().await;
        let upstream = match connect(broker, &caller, destination).await {
            Ok(upstream) => upstream,
            Err(last) => {
                let _ = tx.send(Ok(last.to_pb(&binding))).await;
                return Ok(Response::new(Box::pin(ReceiverStream::new(rx))));
            }
        };
        let _ = tx.send(Ok(RelayDownKind::Connected.to_pb(&binding))).await;
        match upstream {
            Upstream::Direct(tcp) => {
                let (from, to) = tcp.into_split();
                relay_both_ways(from, to, incoming, order, tx, binding);
            }
            Upstream::Proxied(pipe) => {
                let (from, to) = tokio::io::split(pipe);
                relay_both_ways(from, to, incoming, order, tx, binding);
            }
        }
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// Moves the upstream's bytes down the relay stream and the stream's
/// bytes up to the upstream, half-closes passed on, each way on a task of
/// its own.
fn relay_both_ways<R, W>(
    mut from_upstream: R,
    mut to_upstream: W,
    mut incoming: Streaming<pb::RelayUp>,
    mut order: RelayOrder,
    tx: mpsc::Sender<Result<pb::RelayDown, Status>>,
    binding: Binding,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let down_binding = binding.clone();
    let down_tx = tx.clone();
    tokio::spawn(async move {
        // Filled without zeroing first: a connection that receives
        // little costs little.
        let mut buf = Vec::with_capacity(MAX_CHUNK);
        loop {
            buf.clear();
            let message = match from_upstream.read_buf(&mut buf).await {
                Ok(0) => RelayDownKind::ShutdownWrite,
                Ok(_) => RelayDownKind::Data(buf.clone()),
                Err(e) => RelayDownKind::Reset(e.raw_os_error().unwrap_or(libc::ECONNRESET)),
            };
            let last = !matches!(message, RelayDownKind::Data(_));
            if down_tx
                .send(Ok(message.into_pb(&down_binding)))
                .await
                .is_err()
                || last
            {
                return;
            }
        }
    });
    tokio::spawn(async move {
        while let Some(msg) = incoming.next().await {
            let m = match msg {
                Ok(msg) => RelayUpKind::check(msg, &binding).and_then(|m| order.up(&m).map(|()| m)),
                Err(status) => {
                    let _ = tx.send(Err(status)).await;
                    return;
                }
            };
            match m {
                Ok(RelayUpKind::Data(d)) => {
                    if to_upstream.write_all(&d).await.is_err() {
                        return;
                    }
                }
                Ok(RelayUpKind::ShutdownWrite) => {
                    let _ = to_upstream.shutdown().await;
                }
                Ok(RelayUpKind::Connect { .. }) => return,
                Err(e) => {
                    let _ = tx.send(Err(Status::invalid_argument(e.to_string()))).await;
                    return;
                }
            }
        }
    });
}

/// Detaches the commands from a control stream once its task ends.
struct Detach(
    Arc<Commands>,
    mpsc::Sender<Result<pb::SupervisorMessage, Status>>,
);

impl Drop for Detach {
    fn drop(&mut self) {
        self.0.detach(&self.1);
    }
}

/// The Welcome to a sandbox that says it enforces the bundle of `said`
/// (`None`: it waits for its launch), from a supervisor of the bundle of
/// `digest` that holds `launch` when the sandbox was started from a kit;
/// or why the sandbox is refused. A sandbox that has its plan is never
/// handed a launch.
fn welcome(
    said: Option<&str>,
    digest: &str,
    launch: Option<&Arc<[u8]>>,
) -> Result<FromSupervisor, String> {
    match (said, launch) {
        (Some(said), _) if said == digest => Ok(FromSupervisor::Welcome { launch: None }),
        (Some(said), _) => Err(format!(
            "the sandbox enforces bundle {said}, not this supervisor's {digest}"
        )),
        (None, Some(launch)) => Ok(FromSupervisor::Welcome {
            launch: Some(launch.to_vec()),
        }),
        (None, None) => Err(
            "the sandbox waits for its launch (it was started from a kit), and this supervisor wrote its bootstrap with the plan: it has no launch to give".into(),
        ),
    }
}

/// Where the control stream's answers go, each recorded in its order
/// first.
#[derive(Debug, Clone)]
struct Answers {
    tx: mpsc::Sender<Result<pb::SupervisorMessage, Status>>,
    order: Arc<Mutex<ControlOrder>>,
    binding: Binding,
}

impl Answers {
    async fn send(&self, answer: FromSupervisor) {
        let recorded = self
            .order
            .lock()
            .is_ok_and(|mut o| o.answer(&answer).is_ok());
        if recorded {
            let _ = self.tx.send(Ok(answer.to_pb(&self.binding))).await;
        }
    }
}

/// Decides a TCP connect and, when allowed, opens its upstream; the
/// stream's one answer otherwise: refused (and logged), or to be connected
/// on the sandbox's own loopback.
async fn connect(
    broker: &Connector,
    caller: &Caller,
    destination: SocketAddr,
) -> Result<Upstream, RelayDownKind> {
    let ip = canonical_ip(destination.ip());
    let port = destination.port();
    let binary = Binary {
        path: String::from_utf8_lossy(&caller.exe).into_owned(),
        sha256: caller.exe_sha256.as_ref().map(enforcer::sha256_hex),
        deleted: caller.exe_deleted,
    };
    let refuse = |reason: &str, host: Option<&str>, rule: Option<&str>| {
        broker.log.network(&NetEvent {
            denied: true,
            tid: caller.tid,
            pid: caller.pid,
            binary: Some(&binary.path),
            binary_sha256: binary.sha256.as_deref(),
            operator_named: broker.decider.operator_named(host, ip),
            syscall: "connect",
            protocol: "tcp",
            host,
            ip: Some(ip),
            port: Some(port),
            rule,
            reason,
            ..NetEvent::default()
        });
        RelayDownKind::Refused(libc::ECONNREFUSED)
    };
    let decision = broker.decider.decide(&binary, ip, port);
    if !decision.allowed() && ip.is_loopback() && (decision.host.is_none() || port == 53) {
        return Err(RelayDownKind::OwnLoopback);
    }
    if !decision.allowed() {
        let mut reason = decision.conn.reason.to_string();
        if binary.sha256.is_none() && broker.decider.policy().current().pins {
            reason.push_str(UNHASHED);
        }
        return Err(refuse(
            &reason,
            decision.host.as_deref(),
            decision.rule.as_deref(),
        ));
    }
    let planted = caller
        .writable_tree
        .as_deref()
        .and_then(|tree| {
            let tree = Path::new(std::ffi::OsStr::from_bytes(tree));
            broker.decider.planted_in(&binary, tree, ip, port)
        })
        .or_else(|| caller.foreign_code.clone());
    if let Some(why) = planted {
        return Err(refuse(&why, decision.host.as_deref(), None));
    }
    let who = Who {
        pid: caller.pid,
        tid: caller.tid,
    };
    open_route(broker, who, binary, decision, SocketAddr::new(ip, port))
        .await
        .map_err(|e| RelayDownKind::Refused(e.raw_os_error().unwrap_or(libc::ECONNREFUSED)))
}

/// Said of a refusal when the policy in force pins binaries and the
/// sandbox, started under a bundle that pinned none, does not hash them.
const UNHASHED: &str = " (the policy in force pins binaries by SHA-256, but this sandbox was started under a bundle that pinned none and does not hash them: restart it to use pinned rules)";

/// A call the sandbox refused on its own: its deny-log line.
fn log_refusal(log: &DenyLog, r: &RefusalReport) {
    let binary = r.exe.as_deref().map(String::from_utf8_lossy);
    let address = r.address.as_deref().map(String::from_utf8_lossy);
    log.network(&NetEvent {
        denied: true,
        tid: r.tid,
        pid: r.pid,
        binary: binary.as_deref(),
        syscall: &r.syscall,
        protocol: &r.protocol,
        ip: r.destination.map(|d| canonical_ip(d.ip())),
        port: r.destination.map(|d| d.port()),
        address: address.as_deref(),
        reason: &r.reason,
        note: r.note.as_deref(),
        ..NetEvent::default()
    });
}

/// A message from the sandbox refused: one deny-log line says why.
fn refused_message(log: &DenyLog, why: &str) {
    log.network(&NetEvent {
        denied: true,
        syscall: "sandbox-protocol",
        protocol: "grpc",
        reason: why,
        ..NetEvent::default()
    });
}

/// The supervisor's side deciding with `bundle` for the sandbox
/// `binding` (no L7 proxy, no upstream resolver: names resolve as
/// `resolve` says; the deny log at `log`), and the bundle's digest. For the
/// relay's benchmarks and tests: `run` serves the protocol to the real
/// sandbox.
pub fn bundle_side(
    bundle: policy_bundle::Bundle,
    log: &Path,
    resolve: &[(String, std::net::IpAddr)],
    binding: Binding,
) -> std::io::Result<(SupervisorSide, String)> {
    use crate::attribution::Attribution;
    use crate::credentials::Placeholders;
    use crate::decide::Decider;
    use crate::policy::{Active, Policy};

    let real = bundle.digest.clone();
    let log = Arc::new(
        DenyLog::open(Some(log), &bundle.provenance.policy, &real)?
            .for_sandbox(&binding.sandbox_id, binding.generation),
    );
    let attribution = Arc::new(Attribution::new(resolve));
    let answerer = Arc::new(Answerer {
        policy: Arc::new(crate::policy::Swap::new(
            crate::dns::DnsPolicy::from_tables(&bundle.enforcement),
        )),
        attribution: Arc::clone(&attribution),
        resolver: None,
        log: Arc::clone(&log),
    });
    let active = Active::new(bundle, &Placeholders::default(), 0);
    let decider = Arc::new(Decider::new(Arc::new(Policy::new(active)), attribution));
    let broker = Arc::new(Connector {
        decider,
        log: Arc::clone(&log),
        proxy: None,
    });
    let deciding = Deciding::default();
    let _ = deciding.set(broker);
    let side = SupervisorSide::new(deciding, log, answerer, binding, real.clone());
    Ok((side, real))
}

/// Both sides of the protocol in this process, over a Unix socket pair:
/// the supervisor's as [`bundle_side`] makes it, the sandbox's attached as
/// `binding` and saying it enforces `digest` (the bundle's own when
/// `None`).
pub async fn local_pair(
    bundle: policy_bundle::Bundle,
    log: &Path,
    resolve: &[(String, std::net::IpAddr)],
    binding: Binding,
    digest: Option<String>,
) -> Result<sandbox::relay::Supervisor, sandbox::relay::RelayError> {
    let (side, real) = bundle_side(bundle, log, resolve, binding.clone())?;
    let (ours, theirs) = tokio::net::UnixStream::pair()?;
    tokio::spawn(sandbox_protocol::transport::serve(
        side,
        theirs,
        Link::Local,
    ));
    sandbox::relay::Supervisor::attach(ours, Link::Local, binding, Some(digest.unwrap_or(real)))
        .await
}

/// Both sides in this process as two hosts join them: the sandbox's end
/// listens on loopback with a fresh generation's credential, the
/// supervisor's attaches over TCP and TLS 1.3 ([`sandbox_protocol::channel`]).
pub async fn tls_pair(
    bundle: policy_bundle::Bundle,
    log: &Path,
    resolve: &[(String, std::net::IpAddr)],
    binding: Binding,
) -> Result<sandbox::relay::Supervisor, sandbox::relay::RelayError> {
    use sandbox_protocol::channel::{SandboxEnd, SupervisorEnd, issue};

    let (side, real) = bundle_side(bundle, log, resolve, binding.clone())?;
    let (sandbox_cred, supervisor_cred) = issue(&binding).map_err(std::io::Error::other)?;
    let sandbox_end = SandboxEnd::new(&sandbox_cred).map_err(std::io::Error::other)?;
    let supervisor_end = SupervisorEnd::new(&supervisor_cred).map_err(std::io::Error::other)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Ok(tls) = supervisor_end.connect(addr).await {
            let _ = sandbox_protocol::transport::serve(side, tls, Link::Network).await;
        }
    });
    let (tcp, _) = listener.accept().await?;
    let tls = sandbox_end
        .handshake(tcp)
        .await
        .map_err(std::io::Error::other)?;
    sandbox::relay::Supervisor::attach(tls, Link::Network, binding, Some(real)).await
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{IpAddr, Ipv4Addr};

    use sandbox::relay::Connect;

    use super::*;

    /// Both sides over a Unix socket pair: the supervisor's with the real
    /// decider and deny log, the sandbox's with its relay.
    struct Rig {
        dir: tempfile::TempDir,
        attached: Result<sandbox::relay::Supervisor, sandbox::relay::RelayError>,
    }

    impl Rig {
        fn log(&self) -> String {
            std::fs::read_to_string(self.dir.path().join("deny.log")).unwrap_or_default()
        }

        fn sandbox(&self) -> &sandbox::relay::Supervisor {
            self.attached.as_ref().unwrap()
        }
    }

    /// `curl` may reach `port` on loopback, and `wget` with its pin; the
    /// sandbox says it enforces `digest` (the bundle's own by default).
    async fn rig(port: u16, digest: Option<String>) -> Rig {
        let api = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        rig_with(port, digest, &[("api.example.com".to_owned(), api)]).await
    }

    /// A rig where the operator names 127.0.0.1.
    async fn rig_with_loopback_name() -> Rig {
        let named = [(
            "local.example.com".to_owned(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
        )];
        rig_with(1, None, &named).await
    }

    async fn rig_with(port: u16, digest: Option<String>, resolve: &[(String, IpAddr)]) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let bundle = test_bundle(dir.path(), port);
        let binding = Binding {
            sandbox_id: "sb".into(),
            generation: 1,
        };
        let log = dir.path().join("deny.log");
        let attached = local_pair(bundle, &log, resolve, binding, digest).await;
        Rig { dir, attached }
    }

    /// The rigs' policy, compiled in `dir`.
    fn test_bundle(dir: &Path, port: u16) -> policy_bundle::Bundle {
        let policy = dir.join("t.policy");
        std::fs::write(
            &policy,
            format!(
                "policy \"t\" {{\n  binaries pinned = /usr/bin/wget sha256:{pin}\n  allow /usr/bin/curl -> 127.0.0.1:{port}\n  allow /usr/bin/curl -> api.example.com:443\n  allow /usr/bin/curl -> local.example.com:443\n  allow pinned -> 127.0.0.1:{port}\n}}\n",
                pin = "ab".repeat(32)
            ),
        )
        .unwrap();
        let (checked, bundle) = policy_lang::load::compile_file(&policy, None).unwrap();
        bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics))
    }

    /// A sandbox attached to a supervisor that requires its Evidence.
    async fn attach_requiring_evidence(dir: &Path, port: u16) -> sandbox::relay::Supervisor {
        let bundle = test_bundle(dir, port);
        let binding = Binding {
            sandbox_id: "sb".into(),
            generation: 1,
        };
        let (side, digest) =
            bundle_side(bundle, &dir.join("deny.log"), &[], binding.clone()).unwrap();
        let side = side.requiring_evidence(EvidenceRule {
            landlock_hard: true,
            min_abi: 4,
        });
        let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
        tokio::spawn(sandbox_protocol::transport::serve(
            side,
            theirs,
            Link::Local,
        ));
        sandbox::relay::Supervisor::attach(ours, Link::Local, binding, Some(digest))
            .await
            .unwrap()
    }

    fn sound_evidence() -> sandbox_protocol::Evidence {
        sandbox_protocol::Evidence {
            landlock_abi: 7,
            landlock_enforced: true,
            seccomp_mode: 2,
            listener_live: true,
            no_new_privs: true,
            uid: 65_534,
            euid: 65_534,
            ..sandbox_protocol::Evidence::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_is_decided_before_the_evidence_and_short_evidence_stops_the_workload() {
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        std::thread::spawn(move || upstream.incoming().collect::<Vec<_>>());
        let dir = tempfile::tempdir().unwrap();
        let log = || std::fs::read_to_string(dir.path().join("deny.log")).unwrap_or_default();

        let sandbox = attach_requiring_evidence(dir.path(), port).await;
        let early = sandbox
            .connect(caller("/usr/bin/curl"), loopback(port))
            .await;
        assert!(early.is_err(), "a connect decided before the Evidence");
        assert!(log().contains("before the sandbox's Evidence"), "{}", log());
        sandbox.evidence(sound_evidence()).await.unwrap();
        let answer = sandbox
            .connect(caller("/usr/bin/curl"), loopback(port))
            .await
            .unwrap();
        assert!(matches!(answer, Connect::Relayed(_)), "{answer:?}");

        let sandbox = attach_requiring_evidence(dir.path(), port).await;
        let short = sandbox_protocol::Evidence {
            no_new_privs: false,
            cap_effective: 1 << 21,
            ..sound_evidence()
        };
        let refused = sandbox.evidence(short).await.unwrap_err().to_string();
        assert!(
            refused.contains("no_new_privs") && refused.contains("effective"),
            "{refused}"
        );
        assert!(log().contains("the workload must not run"), "{}", log());
        sandbox.closed().await;
    }

    fn caller(exe: &str) -> Caller {
        Caller {
            pid: 5,
            tid: 6,
            exe: exe.as_bytes().to_vec(),
            exe_deleted: false,
            exe_sha256: None,
            foreign_code: None,
            writable_tree: None,
        }
    }

    /// A DNS question for `name`'s A record.
    fn query(name: &str) -> Vec<u8> {
        use hickory_resolver::proto::op::{Message, Query};
        use hickory_resolver::proto::rr::{Name, RecordType};
        let mut m = Message::query();
        m.metadata.id = 7;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        m.to_vec().unwrap()
    }

    fn loopback(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_allowed_connect_is_relayed_to_its_upstream_both_ways() {
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = upstream.accept().unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).unwrap();
            conn.write_all(b"pong:").unwrap();
            conn.write_all(&got).unwrap();
            got
        });
        let rig = rig(port, None).await;
        let answer = rig
            .sandbox()
            .connect(caller("/usr/bin/curl"), loopback(port))
            .await
            .unwrap();
        let Connect::Relayed(mut workload) = answer else {
            panic!("{answer:?}: {}", rig.log());
        };
        let big = vec![7_u8; 300_000];
        let answer = tokio::task::spawn_blocking(move || {
            workload.write_all(&big).unwrap();
            workload.shutdown(std::net::Shutdown::Write).unwrap();
            let mut answer = Vec::new();
            workload.read_to_end(&mut answer).unwrap();
            answer
        })
        .await
        .unwrap();
        let got = server.join().unwrap();
        assert_eq!(got.len(), 300_000, "every byte went up");
        assert_eq!(answer.len(), 5 + 300_000, "every byte came down");
        assert!(answer.starts_with(b"pong:"));
        assert!(rig.log().is_empty(), "{}", rig.log());
    }

    /// Past HTTP/2's usual 200 streams, a connect is still answered at
    /// once rather than held until another connection closes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn three_hundred_connections_are_relayed_at_once() {
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        // Accepted and kept: the listen backlog alone would stall a
        // connect past 128.
        std::thread::spawn(move || upstream.incoming().collect::<Vec<_>>());
        let rig = rig(port, None).await;
        let mut held = Vec::new();
        for i in 0..300 {
            let answer = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                rig.sandbox()
                    .connect(caller("/usr/bin/curl"), loopback(port)),
            )
            .await
            .unwrap_or_else(|_| panic!("connect {i} was held"))
            .unwrap();
            let Connect::Relayed(stream) = answer else {
                panic!("{i}: {answer:?}");
            };
            held.push(stream);
        }
        assert_eq!(held.len(), 300);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refusals_come_back_with_their_errno_and_a_deny_log_line() {
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = upstream.local_addr().unwrap().port();
        let rig = rig(port, None).await;
        let api = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), port);
        let cases = [
            (caller("/usr/bin/python3"), api(443), "no rule"),
            (caller("/usr/bin/curl"), api(444), "no rule"),
            (
                Caller {
                    foreign_code: Some("`/usr/bin/curl` runs code from `/w/x.so`".into()),
                    ..caller("/usr/bin/curl")
                },
                loopback(port),
                "runs code from `/w/x.so`",
            ),
            (
                Caller {
                    writable_tree: Some(b"/usr/bin".to_vec()),
                    ..caller("/usr/bin/curl")
                },
                loopback(port),
                "which the workload can write",
            ),
            // The pin does not match: wget is not allowed.
            (
                Caller {
                    exe_sha256: Some([0xcd; 32]),
                    ..caller("/usr/bin/wget")
                },
                api(443),
                "",
            ),
        ];
        for (i, (who, to, why)) in cases.into_iter().enumerate() {
            let answer = rig.sandbox().connect(who, to).await.unwrap();
            assert!(
                matches!(answer, Connect::Refused(libc::ECONNREFUSED)),
                "{i}: {answer:?}"
            );
            let log = rig.log();
            let lines: Vec<&str> = log.lines().collect();
            assert_eq!(lines.len(), i + 1, "{log}");
            let line: serde_json::Value = serde_json::from_str(lines[i]).unwrap();
            assert_eq!(line["action"], "Denied", "{line}");
            assert!(line.to_string().contains(why), "{i}: {line}");
            // A hashed binary's line carries its hash, for `suggest` to pin.
            let hashes = &line["actor"]["process"]["file"]["hashes"];
            if i == 4 {
                assert_eq!(hashes[0]["value"], "cd".repeat(32), "{line}");
            } else {
                assert!(hashes.is_null(), "{i}: {line}");
            }
        }
        // The pinned binary whose hash matches is allowed.
        let pinned = Caller {
            exe_sha256: Some([0xab; 32]),
            ..caller("/usr/bin/wget")
        };
        let answer = rig.sandbox().connect(pinned, loopback(port)).await.unwrap();
        assert!(matches!(answer, Connect::Relayed(_)), "{answer:?}");
    }

    /// A refusal of a host whose address the operator named says so, for
    /// `suggest` to replay it as it was decided: without the address.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_under_the_operators_name_is_logged_as_such() {
        let rig = rig(1, None).await;
        let api = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 443);
        let answer = rig
            .sandbox()
            .connect(caller("/usr/bin/python3"), api)
            .await
            .unwrap();
        assert!(matches!(answer, Connect::Refused(_)), "{answer:?}");
        let _ = rig
            .sandbox()
            .dns(
                Some(caller("/usr/bin/python3")),
                pb::Transport::Udp,
                query("api.example.com."),
            )
            .await
            .unwrap();
        let answer = rig
            .sandbox()
            .connect(caller("/usr/bin/python3"), api)
            .await
            .unwrap();
        assert!(matches!(answer, Connect::Refused(_)), "{answer:?}");
        let log = rig.log();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &serde_json::Value| l["class_uid"] == 4001)
            .collect();
        assert_eq!(lines.len(), 2, "{log}");
        assert!(
            lines[0]["unmapped"].get("resolved_by").is_none(),
            "bare: {log}"
        );
        assert_eq!(
            lines[1]["dst_endpoint"]["hostname"], "api.example.com",
            "{log}"
        );
        assert_eq!(lines[1]["unmapped"]["resolved_by"], "operator", "{log}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_loopback_connect_naming_no_host_goes_to_the_sandboxs_own_loopback() {
        let rig = rig(1, None).await;
        for who in [
            caller("/usr/bin/python3"),
            Caller {
                exe_sha256: Some([0xcd; 32]),
                ..caller("/usr/bin/wget")
            },
        ] {
            let answer = rig.sandbox().connect(who, loopback(2)).await.unwrap();
            assert!(matches!(answer, Connect::OwnLoopback), "{answer:?}");
        }
        assert!(
            rig.log().is_empty(),
            "the sandbox logs it if nothing listens"
        );
        // Named by the DNS stub, a loopback address is a host's: refused.
        let rig_named = rig_with_loopback_name().await;
        let _ = rig_named
            .sandbox()
            .dns(
                Some(caller("/usr/bin/curl")),
                pb::Transport::Udp,
                query("local.example.com."),
            )
            .await
            .unwrap();
        let answer = rig_named
            .sandbox()
            .connect(caller("/usr/bin/python3"), loopback(443))
            .await
            .unwrap();
        assert!(
            matches!(answer, Connect::Refused(libc::ECONNREFUSED)),
            "{answer:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refusal_the_sandbox_reports_becomes_a_deny_log_line() {
        let rig = rig(1, None).await;
        rig.sandbox()
            .report(RefusalReport {
                pid: 5,
                tid: 6,
                exe: Some(b"/usr/bin/nc".to_vec()),
                syscall: "sendto".into(),
                protocol: "udp".into(),
                destination: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)), 53)),
                address: None,
                reason: "datagrams leave the sandbox only as DNS through its stub".into(),
                note: None,
            })
            .unwrap();
        // The report needs no answer; a DNS question behind it on the same
        // stream shows it was read.
        let _ = rig
            .sandbox()
            .dns(None, pb::Transport::Udp, vec![1, 2, 3])
            .await;
        let log = rig.log();
        let line: serde_json::Value =
            serde_json::from_str(log.lines().next().unwrap_or_default()).unwrap();
        assert_eq!(line["action"], "Denied", "{line}");
        let text = line.to_string();
        assert!(
            text.contains("/usr/bin/nc") && text.contains("192.0.2.9"),
            "{text}"
        );
        assert!(text.contains("only as DNS"), "{text}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sandbox_enforcing_another_bundle_is_refused_at_the_greeting() {
        let other = format!("sha256:{}", "0".repeat(64));
        let rig = rig(1, Some(other)).await;
        let Err(e) = &rig.attached else {
            panic!("attached with another bundle's digest");
        };
        assert!(e.to_string().contains("not this supervisor's"), "{e}");
        assert!(rig.log().contains("not this supervisor's"), "{}", rig.log());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dns_questions_are_answered_by_the_supervisors_stub_logic() {
        use hickory_resolver::proto::op::{Message, ResponseCode};
        use hickory_resolver::proto::rr::RData;

        let rig = rig(1, None).await;
        let ask = |name: &str| {
            rig.sandbox().dns(
                Some(caller("/usr/bin/curl")),
                pb::Transport::Udp,
                query(name),
            )
        };
        let allowed = Message::from_vec(&ask("api.example.com.").await.unwrap()).unwrap();
        assert_eq!(allowed.metadata.id, 7);
        assert_eq!(allowed.metadata.response_code, ResponseCode::NoError);
        let addrs: Vec<RData> = allowed.answers.iter().map(|r| r.data.clone()).collect();
        assert_eq!(
            addrs,
            [RData::A(hickory_resolver::proto::rr::rdata::A(
                Ipv4Addr::new(192, 0, 2, 7)
            ))]
        );
        assert!(rig.log().is_empty(), "{}", rig.log());
        let refused = Message::from_vec(&ask("exfil.example.net.").await.unwrap()).unwrap();
        assert_eq!(refused.metadata.response_code, ResponseCode::NXDomain);
        assert!(refused.answers.is_empty());
        assert!(rig.log().contains("exfil.example.net"), "{}", rig.log());
        // Not a DNS message at all: no reply, and a log line.
        let none = rig
            .sandbox()
            .dns(None, pb::Transport::Udp, vec![1, 2, 3])
            .await
            .unwrap();
        assert!(none.is_empty());
        assert_eq!(rig.log().lines().count(), 2, "{}", rig.log());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_datagram_is_refused_with_a_deny_log_line() {
        let rig = rig(1, None).await;
        let to = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)), 443);
        let answer = rig
            .sandbox()
            .datagram(caller("/usr/bin/curl"), to, b"quic".to_vec())
            .await
            .unwrap();
        assert_eq!(answer, Err(libc::EACCES));
        let log = rig.log();
        assert!(
            log.contains("UDP goes only") && log.contains("192.0.2.9"),
            "{log}"
        );
    }

    /// A supervisor welcomes a sandbox of its bundle without a launch,
    /// hands its launch only to one that waits for it, and refuses a
    /// waiting sandbox when it has none to give.
    #[test]
    fn the_welcome_carries_the_launch_only_to_a_sandbox_that_waits() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let launch: Arc<[u8]> = Arc::from(&b"{}"[..]);
        for held in [None, Some(&launch)] {
            assert_eq!(
                welcome(Some(&digest), &digest, held),
                Ok(FromSupervisor::Welcome { launch: None })
            );
            let other = format!("sha256:{}", "b".repeat(64));
            assert!(
                welcome(Some(&other), &digest, held)
                    .unwrap_err()
                    .contains("not this supervisor's")
            );
        }
        assert_eq!(
            welcome(None, &digest, Some(&launch)),
            Ok(FromSupervisor::Welcome {
                launch: Some(b"{}".to_vec())
            })
        );
        assert!(
            welcome(None, &digest, None)
                .unwrap_err()
                .contains("the sandbox waits for its launch")
        );
    }
}
