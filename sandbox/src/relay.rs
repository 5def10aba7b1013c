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
use sandbox_protocol::{
    Binding, Caller, ControlOrder, DatagramVerdict, FromSandbox, FromSupervisor, MAX_CHUNK,
    ProtocolError, RefusalReport, RelayDownKind, RelayOrder, RelayUpKind, pb, transport,
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
    /// Where a report waits for room on the control stream.
    runtime: tokio::runtime::Handle,
}

impl Supervisor {
    /// Attaches over `io` as sandbox `binding`, enforcing the bundle of
    /// `bundle_digest`: sends the Hello and waits for the Welcome.
    pub async fn attach<IO>(
        io: IO,
        binding: Binding,
        bundle_digest: String,
    ) -> Result<Self, RelayError>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let mut client = transport::client(io).await?;
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
        let me = Self {
            client,
            binding,
            requests,
            waiting: Arc::default(),
            order: Arc::new(Mutex::new(order)),
            next_id: Arc::new(AtomicU64::new(1)),
            runtime: tokio::runtime::Handle::current(),
        };
        tokio::spawn(dispatch(
            answers,
            me.binding.clone(),
            Arc::clone(&me.order),
            Arc::clone(&me.waiting),
        ));
        Ok(me)
    }

    /// Asks the supervisor's DNS logic to answer `packet`, a question the
    /// workload's `caller` sent the stub over `transport`: the reply to
    /// send back, empty for none.
    pub async fn dns(
        &self,
        caller: Caller,
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

    async fn ask(&self, id: u64, request: FromSandbox) -> Result<FromSupervisor, RelayError> {
        let (tx, rx) = oneshot::channel();
        self.order
            .lock()
            .map_err(|_| RelayError::Gone)?
            .request(&request)?;
        self.waiting
            .lock()
            .map_err(|_| RelayError::Gone)?
            .insert(id, tx);
        self.requests
            .send(request.to_pb(&self.binding))
            .await
            .map_err(|_| RelayError::Gone)?;
        rx.await.map_err(|_| RelayError::Gone)
    }

    /// Reports a call the sandbox refused on its own, for the deny log.
    /// Never waits: callable from any thread, async or not.
    pub fn report(&self, refusal: RefusalReport) -> Result<(), RelayError> {
        let message = FromSandbox::Refusal(refusal);
        self.order
            .lock()
            .map_err(|_| RelayError::Gone)?
            .request(&message)?;
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
        let (up_tx, up_rx) = mpsc::channel(RELAY_QUEUE);
        up_tx
            .send(
                RelayUpKind::Connect {
                    caller,
                    destination,
                }
                .to_pb(&self.binding),
            )
            .await
            .map_err(|_| RelayError::Gone)?;
        let mut client = self.client.clone();
        // The workload's socket is made while the supervisor decides.
        let (down, pair) = tokio::join!(
            client.relay(ReceiverStream::new(up_rx)),
            socket_pair(destination.is_ipv6())
        );
        let mut down = down?.into_inner();
        let mut order = RelayOrder::new();
        let first = down.next().await.ok_or(RelayError::Gone)??;
        let answer = RelayDownKind::check(first, &self.binding)?;
        order.down(&answer)?;
        match answer {
            RelayDownKind::Connected => {
                let (workload_end, ours) = pair?;
                tokio::spawn(pump(ours, up_tx, down, order, self.binding.clone()));
                Ok(Connect::Relayed(workload_end))
            }
            RelayDownKind::Refused(errno) => Ok(Connect::Refused(errno)),
            RelayDownKind::OwnLoopback => Ok(Connect::OwnLoopback),
            _ => Err(ProtocolError::Order("relay data before the answer").into()),
        }
    }
}

/// Hands each answer of the control stream to the request waiting for it.
/// A supervisor that breaks the protocol answers nothing more: the stream
/// is dropped, and every request still waiting fails.
async fn dispatch(
    mut answers: tonic::Streaming<pb::SupervisorMessage>,
    binding: Binding,
    order: Arc<Mutex<ControlOrder>>,
    waiting: Arc<Mutex<HashMap<u64, oneshot::Sender<FromSupervisor>>>>,
) {
    while let Some(Ok(msg)) = answers.next().await {
        let answer = FromSupervisor::check(msg, &binding).and_then(|a| {
            order
                .lock()
                .map_err(|_| ProtocolError::Order("the stream's state is lost"))?
                .answer(&a)
                .map(|()| a)
        });
        let Ok(answer) = answer else { break };
        let (FromSupervisor::Dns { request_id, .. } | FromSupervisor::Datagram { request_id, .. }) =
            &answer
        else {
            break;
        };
        let waiter = waiting
            .lock()
            .ok()
            .and_then(|mut w| w.remove(&request_id.get()));
        if let Some(waiter) = waiter {
            let _ = waiter.send(answer);
        }
    }
    if let Ok(mut w) = waiting.lock() {
        w.clear();
    }
}

/// A TCP connection inside this network namespace, over loopback: the
/// workload's end and ours.
async fn socket_pair(ipv6: bool) -> io::Result<(std::net::TcpStream, tokio::net::TcpStream)> {
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
        let mut buf = vec![0_u8; MAX_CHUNK];
        loop {
            let message = match from_workload.read(&mut buf).await {
                Ok(0) | Err(_) => RelayUpKind::ShutdownWrite,
                Ok(n) => RelayUpKind::Data(buf.get(..n).unwrap_or_default().to_vec()),
            };
            let last = message == RelayUpKind::ShutdownWrite;
            if up.send(message.to_pb(&up_binding)).await.is_err() || last {
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
