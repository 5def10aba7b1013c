//! The sandbox's side of the sandbox protocol (`docs/sandbox-protocol.md`):
//! it asks the supervisor about each connect on a relay stream of its own,
//! and for an allowed one gives the workload a real connected TCP socket
//! whose bytes it relays over that stream.
//!
//! The workload's socket is one end of a TCP connection made inside the
//! workload's network namespace (its loopback): the sandbox listens on an
//! ephemeral loopback port, connects, accepts, and keeps the accepted end,
//! which it pumps to and from the relay stream. Nothing the workload does
//! to its end reaches anything but that pump.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox_protocol::pb::broker_client::BrokerClient;
use sandbox_protocol::transport::Link;
use sandbox_protocol::{
    Binding, Caller, ControlOrder, DatagramVerdict, Evidence, ExecDownKind, ExecRequest,
    ExecUpKind, FromSandbox, FromSupervisor, MAX_CHUNK, ProtocolError, RefusalReport,
    RelayDownKind, RelayOrder, RelayUpKind, pb, transport,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// Requests in flight to the supervisor before a new one waits.
const CONTROL_QUEUE: usize = 64;
/// Relay chunks in flight upward for one connection.
const RELAY_QUEUE: usize = 4;
/// How long an answer may take: the supervisor gives an upstream
/// connect 10 s, and a lookup less.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the supervisor could not be asked, or its answer not used. The
/// caller refuses the call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The connection to the supervisor failed.
    #[error(transparent)]
    Transport(#[from] transport::TransportError),
    /// A call on it failed (the stream ended, or the supervisor refused a
    /// message).
    #[error("the supervisor ended the exchange: {0}")]
    Status(#[from] tonic::Status),
    /// The supervisor sent a message the protocol refuses.
    #[error("the supervisor broke the protocol: {0}")]
    Protocol(#[from] ProtocolError),
    /// The control stream is gone: no answer will come.
    #[error("the supervisor is gone")]
    Gone,
    /// A socket for the workload could not be made.
    #[error("cannot make the workload's socket: {0}")]
    Socket(#[from] io::Error),
    /// The supervisor did not answer in time.
    #[error("the supervisor did not answer within {0:?}")]
    TimedOut(Duration),
    /// The supervisor refused, saying why.
    #[error("the supervisor refused: {0}")]
    Refused(String),
}

/// How many relay streams, and workload sockets of each family, are kept
/// ready.
const PREPARED: usize = 8;

/// A relay stream opened ahead of its connect: the request's headers are
/// on their way, and the supervisor's handler waits for the question.
#[derive(Debug)]
struct Opened {
    up: mpsc::Sender<pb::RelayUp>,
    response: tokio::task::JoinHandle<
        Result<tonic::Response<tonic::Streaming<pb::RelayDown>>, tonic::Status>,
    >,
}

/// The workload's end of a loopback connection and ours.
type Pair = (std::net::TcpStream, tokio::net::TcpStream);

/// What is kept ready for the next connects.
#[derive(Debug, Default)]
struct Prepared {
    streams: Vec<Opened>,
    pairs_v4: Vec<Pair>,
    pairs_v6: Vec<Pair>,
    /// IPv6 loopback is missing here: no IPv6 pair is prepared.
    no_v6: bool,
    /// A task is topping up.
    refilling: bool,
}

/// What [`Prepared`] lacks.
struct Wanted {
    stream: bool,
    v4: bool,
    v6: bool,
}

impl Prepared {
    fn wanted(&self) -> Option<Wanted> {
        let want = Wanted {
            stream: self.streams.len() < PREPARED,
            v4: self.pairs_v4.len() < PREPARED,
            v6: !self.no_v6 && self.pairs_v6.len() < PREPARED,
        };
        (want.stream || want.v4 || want.v6).then_some(want)
    }
}

/// Opens a relay stream on `client`, its question to come.
fn open(mut client: BrokerClient<Channel>) -> Opened {
    let (up, rx) = mpsc::channel(RELAY_QUEUE);
    let response = tokio::spawn(async move { client.relay(ReceiverStream::new(rx)).await });
    Opened { up, response }
}

/// The supervisor's answer to a connect.
#[derive(Debug)]
pub enum Connect {
    /// The workload's end of a connected socket (blocking, close-on-exec,
    /// for the caller to install), whose other end is relayed until
    /// either side is done.
    Relayed(std::net::TcpStream),
    /// Refused with this errno.
    Refused(i32),
    /// No rule allows it; connect the workload on its own loopback.
    OwnLoopback,
}

/// The attachment to the supervisor, after the greeting.
#[derive(Debug, Clone)]
pub struct Supervisor {
    client: BrokerClient<Channel>,
    binding: Binding,
    requests: mpsc::Sender<pb::SandboxMessage>,
    /// Requests sent on the control stream, waiting for their answer.
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<FromSupervisor>>>>,
    order: Arc<Mutex<ControlOrder>>,
    next_id: Arc<AtomicU64>,
    /// Where a report waits for room on the control stream, and the
    /// prepared streams and sockets are made.
    runtime: tokio::runtime::Handle,
    prepared: Arc<Mutex<Prepared>>,
    /// [`ANSWER_TIMEOUT`], unless set otherwise.
    answer_within: Duration,
    /// Turns true when the control stream has ended.
    ended: tokio::sync::watch::Receiver<bool>,
    /// Waits for the answer to the Evidence: the Go, or why none came.
    go: GoWaiter,
    /// Runs the further commands the supervisor asks for.
    exec: ExecSlot,
    /// The launch the Welcome carried, to a sandbox that waited for it.
    launch: Option<Arc<[u8]>>,
}

type GoWaiter = Arc<Mutex<Option<oneshot::Sender<Result<(), String>>>>>;

/// What runs a further command the supervisor asked for: given the request
/// and the way to open its Exec stream. Called on the control stream's
/// task: it must not block.
pub type ExecHandler = Arc<dyn Fn(ExecRequest, ExecChannel) + Send + Sync>;

/// The handler, shared by every clone of one attachment.
#[derive(Clone, Default)]
struct ExecSlot(Arc<Mutex<Option<ExecHandler>>>);

impl std::fmt::Debug for ExecSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExecSlot")
    }
}

/// Where a further command's Exec stream is opened: on the attachment its
/// request came by, whichever is in use by then.
#[derive(Debug, Clone)]
pub struct ExecChannel {
    client: BrokerClient<Channel>,
    binding: Binding,
}

/// The upward half of an open Exec stream.
#[derive(Debug, Clone)]
pub struct ExecSender {
    up: mpsc::Sender<pb::ExecUp>,
    binding: Binding,
}

/// The downward half of an open Exec stream, where a cancel may come.
#[derive(Debug)]
pub struct ExecCancel {
    down: tonic::Streaming<pb::ExecDown>,
    binding: Binding,
}

impl ExecChannel {
    /// Says on an Exec stream of its own that `request` will not run, and
    /// why. Returns at once: the stream is opened on a task.
    pub fn refuse(self, request: &ExecRequest, why: &str) {
        let refused = ExecUpKind::Failed {
            exec_id: request.exec_id,
            reason: why.to_owned(),
        };
        tokio::spawn(async move {
            if let Ok((_up, down)) = self.open(refused).await {
                down.closed_within(EXEC_ENDED_WITHIN).await;
            }
        });
    }

    /// Opens an Exec stream whose first message is `first`.
    pub async fn open(mut self, first: ExecUpKind) -> Result<(ExecSender, ExecCancel), RelayError> {
        let (up, rx) = mpsc::channel(RELAY_QUEUE);
        up.send(first.into_pb(&self.binding))
            .await
            .map_err(|_| RelayError::Gone)?;
        let down = self
            .client
            .exec(ReceiverStream::new(rx))
            .await?
            .into_inner();
        Ok((
            ExecSender {
                up,
                binding: self.binding.clone(),
            },
            ExecCancel {
                down,
                binding: self.binding,
            },
        ))
    }
}

impl ExecSender {
    /// Sends `message` up, waiting for room.
    pub async fn send(&self, message: ExecUpKind) -> Result<(), RelayError> {
        self.up
            .send(message.into_pb(&self.binding))
            .await
            .map_err(|_| RelayError::Gone)
    }
}

impl ExecCancel {
    /// Returns once the supervisor cancelled the command or the stream
    /// ended: either way nobody reads its output any more.
    pub async fn cancelled(&mut self) {
        while let Some(Ok(msg)) = self.down.next().await {
            if ExecDownKind::check(msg, &self.binding).is_ok() {
                return;
            }
        }
    }

    /// After the last message: waits (at most `limit`) until the
    /// supervisor ends the stream. Dropping this half sooner resets the
    /// stream, and what is still queued upward is lost with it.
    pub async fn closed_within(mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while let Some(Ok(_)) = self.down.next().await {}
        })
        .await;
    }
}

/// How long the supervisor has to end an Exec stream once it has the
/// stream's last message.
pub const EXEC_ENDED_WITHIN: Duration = Duration::from_secs(2);

impl Supervisor {
    /// Attaches over `io`, carried by `link`, as sandbox `binding`,
    /// enforcing the bundle of `bundle_digest` (`None`: waiting for the
    /// launch, which the Welcome must then carry): sends the Hello and
    /// waits for the Welcome.
    pub async fn attach<IO>(
        io: IO,
        link: Link,
        binding: Binding,
        bundle_digest: Option<String>,
    ) -> Result<Self, RelayError>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut client = transport::client(io, link).await?;
        let (requests, rx) = mpsc::channel(CONTROL_QUEUE);
        let hello = FromSandbox::Hello { bundle_digest };
        let mut order = ControlOrder::new();
        order.request(&hello)?;
        requests
            .send(hello.to_pb(&binding))
            .await
            .map_err(|_| RelayError::Gone)?;
        let mut answers = client.control(ReceiverStream::new(rx)).await?.into_inner();
        let first = answers.next().await.ok_or(RelayError::Gone)??;
        let welcome = FromSupervisor::check(first, &binding)?;
        order.answer(&welcome)?;
        let launch = match welcome {
            FromSupervisor::Welcome { launch } => launch.map(Arc::from),
            _ => None,
        };
        let (ending, ended) = tokio::sync::watch::channel(false);
        let me = Self {
            client,
            binding,
            requests,
            waiting: Arc::default(),
            order: Arc::new(Mutex::new(order)),
            next_id: Arc::new(AtomicU64::new(1)),
            runtime: tokio::runtime::Handle::current(),
            prepared: Arc::default(),
            answer_within: ANSWER_TIMEOUT,
            ended,
            go: Arc::default(),
            exec: ExecSlot::default(),
            launch,
        };
        let dispatching = dispatch(
            answers,
            Dispatch {
                binding: me.binding.clone(),
                order: Arc::clone(&me.order),
                waiting: Arc::clone(&me.waiting),
                go: Arc::clone(&me.go),
                exec: me.exec.clone(),
                channel: ExecChannel {
                    client: me.client.clone(),
                    binding: me.binding.clone(),
                },
            },
        );
        tokio::spawn(async move {
            dispatching.await;
            let _ = ending.send(true);
        });
        me.refill();
        Ok(me)
    }

    /// The launch the Welcome carried: present exactly when the Hello
    /// waited for one.
    #[must_use]
    pub fn launch(&self) -> Option<&[u8]> {
        self.launch.as_deref()
    }

    /// Runs the further commands the supervisor asks for with `handler`
    /// from now on; until one is set, each is refused on its Exec stream.
    pub fn on_exec(&self, handler: ExecHandler) {
        if let Ok(mut slot) = self.exec.0.lock() {
            *slot = Some(handler);
        }
    }

    /// Returns once the control stream has ended: the supervisor is gone,
    /// the channel dropped, or the supervisor broke the protocol. No
    /// question is answered after that.
    pub async fn closed(&self) {
        let mut ended = self.ended.clone();
        let _ = ended.wait_for(|ended| *ended).await;
    }

    /// Waits at most `limit` for each answer from now on; a question left
    /// unanswered fails with [`RelayError::TimedOut`].
    #[must_use]
    pub fn answer_within(mut self, limit: Duration) -> Self {
        self.answer_within = limit;
        self
    }

    /// Asks the supervisor's DNS logic to answer `packet`, a question the
    /// workload (its `caller`, when known) sent the stub over `transport`:
    /// the reply to send back, empty for none.
    pub async fn dns(
        &self,
        caller: Option<Caller>,
        transport: pb::Transport,
        packet: Vec<u8>,
    ) -> Result<Vec<u8>, RelayError> {
        let request_id = NonZeroU64::new(self.next_id.fetch_add(1, Ordering::Relaxed))
            .ok_or(RelayError::Gone)?;
        let answer = self
            .ask(
                request_id.get(),
                FromSandbox::Dns {
                    request_id,
                    caller,
                    transport,
                    packet,
                },
            )
            .await?;
        match answer {
            FromSupervisor::Dns { packet, .. } => Ok(packet),
            _ => Err(ProtocolError::Order("an answer of another kind than its request").into()),
        }
    }

    /// Asks the supervisor to send `payload` to `destination`, a UDP
    /// datagram of the workload's `caller`: the bytes sent, or the errno
    /// the supervisor chose.
    pub async fn datagram(
        &self,
        caller: Caller,
        destination: SocketAddr,
        payload: Vec<u8>,
    ) -> Result<Result<u64, i32>, RelayError> {
        let request_id = NonZeroU64::new(self.next_id.fetch_add(1, Ordering::Relaxed))
            .ok_or(RelayError::Gone)?;
        let answer = self
            .ask(
                request_id.get(),
                FromSandbox::Datagram {
                    request_id,
                    caller,
                    destination,
                    payload,
                },
            )
            .await?;
        match answer {
            FromSupervisor::Datagram { verdict, .. } => Ok(match verdict {
                DatagramVerdict::Sent(n) => Ok(n),
                DatagramVerdict::Refused(errno) => Err(errno),
            }),
            _ => Err(ProtocolError::Order("an answer of another kind than its request").into()),
        }
    }

    /// Records `message` in the control stream's order, before it is sent
    /// and before its answer can come.
    fn record(&self, message: &FromSandbox) -> Result<(), RelayError> {
        self.order
            .lock()
            .map_err(|_| RelayError::Gone)?
            .request(message)?;
        Ok(())
    }

    /// Sends a recorded `message` on the control stream.
    async fn send(&self, message: &FromSandbox) -> Result<(), RelayError> {
        self.requests
            .send(message.to_pb(&self.binding))
            .await
            .map_err(|_| RelayError::Gone)
    }

    async fn ask(&self, id: u64, request: FromSandbox) -> Result<FromSupervisor, RelayError> {
        let (tx, rx) = oneshot::channel();
        self.record(&request)?;
        self.waiting
            .lock()
            .map_err(|_| RelayError::Gone)?
            .insert(id, tx);
        self.send(&request).await?;
        match tokio::time::timeout(self.answer_within, rx).await {
            Ok(answer) => answer.map_err(|_| RelayError::Gone),
            Err(_) => {
                if let Ok(mut w) = self.waiting.lock() {
                    w.remove(&id);
                }
                Err(RelayError::TimedOut(self.answer_within))
            }
        }
    }

    /// Sends what the kernel says of the workload, and waits for the
    /// supervisor's Go: `Err` with the supervisor's reason when it
    /// refused (the workload must not run).
    pub async fn evidence(&self, evidence: Evidence) -> Result<(), RelayError> {
        let (tx, rx) = oneshot::channel();
        let message = FromSandbox::Evidence(evidence);
        self.record(&message)?;
        *self.go.lock().map_err(|_| RelayError::Gone)? = Some(tx);
        self.send(&message).await?;
        match tokio::time::timeout(self.answer_within, rx).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(why))) => Err(RelayError::Refused(why)),
            Ok(Err(_)) => Err(RelayError::Gone),
            Err(_) => Err(RelayError::TimedOut(self.answer_within)),
        }
    }

    /// Reports how the workload ended, the last message, and waits (at
    /// most `within`) until the supervisor has closed the stream.
    pub async fn report_ended(&self, status: u8, within: Duration) -> Result<(), RelayError> {
        let message = FromSandbox::Ended(status);
        self.record(&message)?;
        self.send(&message).await?;
        tokio::time::timeout(within, self.closed())
            .await
            .map_err(|_| RelayError::TimedOut(within))
    }

    /// Reports a call the sandbox refused on its own, for the deny log.
    /// Never waits: callable from any thread, async or not.
    pub fn report(&self, refusal: RefusalReport) -> Result<(), RelayError> {
        let message = FromSandbox::Refusal(refusal);
        self.record(&message)?;
        match self.requests.try_send(message.to_pb(&self.binding)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(m)) => {
                let requests = self.requests.clone();
                self.runtime.spawn(async move { requests.send(m).await });
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(RelayError::Gone),
        }
    }

    /// Asks whether `caller` may connect to `destination` over TCP, on a
    /// relay stream of its own.
    pub async fn connect(
        &self,
        caller: Caller,
        destination: SocketAddr,
    ) -> Result<Connect, RelayError> {
        let opened = self.opened()?;
        opened
            .up
            .send(
                RelayUpKind::Connect {
                    caller,
                    destination,
                }
                .into_pb(&self.binding),
            )
            .await
            .map_err(|_| RelayError::Gone)?;
        let pair = self.pair(destination.is_ipv6());
        let answer = async {
            let mut down = opened
                .response
                .await
                .map_err(|_| RelayError::Gone)??
                .into_inner();
            let first = down.next().await.ok_or(RelayError::Gone)??;
            Ok::<_, RelayError>((down, first))
        };
        let (down, first) = tokio::time::timeout(self.answer_within, answer)
            .await
            .map_err(|_| RelayError::TimedOut(self.answer_within))??;
        let mut order = RelayOrder::new();
        let answer = RelayDownKind::check(first, &self.binding)?;
        order.down(&answer)?;
        match answer {
            RelayDownKind::Connected => {
                let (workload_end, ours) = pair.await?;
                tokio::spawn(pump(ours, opened.up, down, order, self.binding.clone()));
                Ok(Connect::Relayed(workload_end))
            }
            RelayDownKind::Refused(errno) => Ok(Connect::Refused(errno)),
            RelayDownKind::OwnLoopback => Ok(Connect::OwnLoopback),
            _ => Err(ProtocolError::Order("relay data before the answer").into()),
        }
    }

    /// A relay stream opened ahead, waiting for its question; the next is
    /// opened meanwhile, so that a connect does not wait for the stream's
    /// headers to cross and its handler to start.
    fn opened(&self) -> Result<Opened, RelayError> {
        let taken = self
            .prepared
            .lock()
            .map_err(|_| RelayError::Gone)?
            .streams
            .pop();
        let opened = match taken {
            Some(o) => o,
            None => open(self.client.clone()),
        };
        self.refill();
        Ok(opened)
    }

    /// A workload socket and its other end, made ahead; made now when none
    /// is left.
    async fn pair(&self, ipv6: bool) -> io::Result<Pair> {
        let taken = self.prepared.lock().ok().and_then(|mut p| {
            if ipv6 {
                p.pairs_v6.pop()
            } else {
                p.pairs_v4.pop()
            }
        });
        self.refill();
        match taken {
            Some(pair) => Ok(pair),
            None => socket_pair(ipv6).await,
        }
    }

    /// Tops the prepared streams and sockets up, off the caller's path;
    /// one task at a time.
    fn refill(&self) {
        match self.prepared.lock() {
            Ok(mut p) if !p.refilling && p.wanted().is_some() => p.refilling = true,
            _ => return,
        }
        let prepared = Arc::clone(&self.prepared);
        let client = self.client.clone();
        self.runtime.spawn(async move {
            loop {
                let want = match prepared.lock() {
                    Ok(mut p) => match p.wanted() {
                        Some(want) => want,
                        None => {
                            p.refilling = false;
                            return;
                        }
                    },
                    Err(_) => return,
                };
                let stream = want.stream.then(|| open(client.clone()));
                let v4 = if want.v4 {
                    socket_pair(false).await.ok()
                } else {
                    None
                };
                let v6 = if want.v6 {
                    socket_pair(true).await.ok()
                } else {
                    None
                };
                let Ok(mut p) = prepared.lock() else { return };
                p.streams.extend(stream);
                let v4_failed = want.v4 && v4.is_none();
                p.pairs_v4.extend(v4);
                // Without IPv6 loopback none is made; a connect to an IPv6
                // address then makes its own, and fails as it would have.
                p.no_v6 |= want.v6 && v6.is_none();
                p.pairs_v6.extend(v6);
                if v4_failed {
                    p.refilling = false;
                    return;
                }
            }
        });
    }
}

/// The supervisor attached now. A sandbox started on its own keeps one
/// for its whole run and puts the new attachment in it when the
/// supervisor reattaches after the channel dropped; every call asks the
/// one attached when it is made.
#[derive(Debug, Clone)]
pub struct Attached(Arc<std::sync::RwLock<Supervisor>>);

impl Attached {
    /// Starts with `supervisor`.
    #[must_use]
    pub fn new(supervisor: Supervisor) -> Self {
        Self(Arc::new(std::sync::RwLock::new(supervisor)))
    }

    /// The attachment in use.
    #[must_use]
    pub fn current(&self) -> Supervisor {
        self.0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Puts `supervisor` in use from now on.
    pub fn replace(&self, supervisor: Supervisor) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = supervisor;
    }
}

/// Where [`dispatch`] hands what the supervisor says.
struct Dispatch {
    binding: Binding,
    order: Arc<Mutex<ControlOrder>>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<FromSupervisor>>>>,
    go: GoWaiter,
    exec: ExecSlot,
    channel: ExecChannel,
}

/// Hands each answer of the control stream to the request waiting for it,
/// and each further command to the exec handler. A supervisor that breaks
/// the protocol answers nothing more: the stream is dropped, and every
/// request still waiting fails.
async fn dispatch(mut answers: tonic::Streaming<pb::SupervisorMessage>, to: Dispatch) {
    let Dispatch {
        binding,
        order,
        waiting,
        go,
        exec,
        channel,
    } = to;
    let mut why = "the supervisor closed the channel".to_owned();
    loop {
        let msg = match answers.next().await {
            Some(Ok(msg)) => msg,
            Some(Err(status)) => {
                why = status.message().to_owned();
                break;
            }
            None => break,
        };
        let answer = FromSupervisor::check(msg, &binding).and_then(|a| {
            order
                .lock()
                .map_err(|_| ProtocolError::Order("the stream's state is lost"))?
                .answer(&a)
                .map(|()| a)
        });
        let answer = match answer {
            Ok(answer) => answer,
            Err(e) => {
                why = format!("the supervisor broke the protocol: {e}");
                break;
            }
        };
        let request_id = match &answer {
            FromSupervisor::Dns { request_id, .. }
            | FromSupervisor::Datagram { request_id, .. } => request_id.get(),
            FromSupervisor::Go => {
                if let Some(waiter) = go.lock().ok().and_then(|mut g| g.take()) {
                    let _ = waiter.send(Ok(()));
                }
                continue;
            }
            FromSupervisor::Exec(request) => {
                let handler = exec.0.lock().ok().and_then(|h| h.clone());
                match handler {
                    Some(run) => run(request.clone(), channel.clone()),
                    None => channel
                        .clone()
                        .refuse(request, "this sandbox runs no further commands"),
                }
                continue;
            }
            FromSupervisor::Welcome { .. } => break,
        };
        let waiter = waiting.lock().ok().and_then(|mut w| w.remove(&request_id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(answer);
        }
    }
    if let Ok(mut w) = waiting.lock() {
        w.clear();
    }
    if let Some(waiter) = go.lock().ok().and_then(|mut g| g.take()) {
        let _ = waiter.send(Err(why));
    }
}

/// A TCP connection inside this network namespace, over loopback: the
/// workload's end and ours.
async fn socket_pair(ipv6: bool) -> io::Result<Pair> {
    let loopback = if ipv6 {
        SocketAddr::from((Ipv6Addr::LOCALHOST, 0))
    } else {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
    };
    let listener = tokio::net::TcpListener::bind(loopback).await?;
    let at = listener.local_addr()?;
    let (connected, accepted) = tokio::join!(tokio::net::TcpStream::connect(at), listener.accept());
    let workload_end = connected?;
    let (ours, from) = accepted?;
    // Only our own connect may be the one accepted.
    if from != workload_end.local_addr()? {
        return Err(io::Error::other(
            "another connection reached the relay's listener",
        ));
    }
    let workload_end = workload_end.into_std()?;
    workload_end.set_nonblocking(false)?;
    Ok((workload_end, ours))
}

/// Moves bytes between our end of the workload's connection and the relay
/// stream, with half-closes passed on, until both directions are done.
async fn pump(
    ours: tokio::net::TcpStream,
    up: mpsc::Sender<pb::RelayUp>,
    mut down: tonic::Streaming<pb::RelayDown>,
    mut order: RelayOrder,
    binding: Binding,
) {
    let (mut from_workload, mut to_workload) = ours.into_split();
    let up_binding = binding.clone();
    let upward = async move {
        // Filled without zeroing first: a connection that sends little
        // costs little.
        let mut buf = Vec::with_capacity(MAX_CHUNK);
        loop {
            buf.clear();
            let message = match from_workload.read_buf(&mut buf).await {
                Ok(0) | Err(_) => RelayUpKind::ShutdownWrite,
                Ok(_) => RelayUpKind::Data(buf.clone()),
            };
            let last = message == RelayUpKind::ShutdownWrite;
            if up.send(message.into_pb(&up_binding)).await.is_err() || last {
                return;
            }
        }
    };
    let downward = async move {
        while let Some(Ok(msg)) = down.next().await {
            let checked =
                RelayDownKind::check(msg, &binding).and_then(|m| order.down(&m).map(|()| m));
            match checked {
                Ok(RelayDownKind::Data(d)) => {
                    if to_workload.write_all(&d).await.is_err() {
                        break;
                    }
                }
                Ok(RelayDownKind::ShutdownWrite) => {
                    let _ = to_workload.shutdown().await;
                    return false;
                }
                Ok(_) | Err(_) => break,
            }
        }
        // The upstream failed or the stream broke: the workload's socket
        // is reset rather than closed cleanly, so it cannot take a cut
        // answer for a whole one.
        let _ = socket2::SockRef::from(to_workload.as_ref()).set_linger(Some(Duration::ZERO));
        true
    };
    let mut upward = Box::pin(upward);
    let mut downward = Box::pin(downward);
    tokio::select! {
        () = &mut upward => {
            downward.await;
        }
        reset = &mut downward => {
            if !reset {
                upward.await;
            }
        }
    }
}
