//! The protocol over a real Unix socket pair: a supervisor that checks
//! every message, a sandbox client, relay streams with flow control of
//! their own, and the message limit enforced by the codec.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

use std::num::NonZeroU64;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sandbox_protocol::pb::broker_server::Broker;
use sandbox_protocol::pb::{self, broker_client::BrokerClient};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{
    Binding, Caller, ControlOrder, FromSandbox, FromSupervisor, MAX_CHUNK, RelayDownKind,
    RelayOrder, RelayUpKind, transport,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn binding() -> Binding {
    Binding {
        sandbox_id: "sb-test".into(),
        generation: 1,
    }
}

/// Allows ports 443 and 444 only; relays echo, except on port 444, whose
/// stream is never read.
struct TestSupervisor {
    refusals: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl Broker for TestSupervisor {
    type ControlStream = Out<pb::SupervisorMessage>;
    type RelayStream = Out<pb::RelayDown>;
    type ExecStream = Out<pb::ExecDown>;

    async fn exec(
        &self,
        _request: Request<Streaming<pb::ExecUp>>,
    ) -> Result<Response<Self::ExecStream>, Status> {
        Err(Status::unimplemented("no further commands here"))
    }

    async fn control(
        &self,
        request: Request<Streaming<pb::SandboxMessage>>,
    ) -> Result<Response<Self::ControlStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let refusals = Arc::clone(&self.refusals);
        tokio::spawn(async move {
            let b = binding();
            let mut order = ControlOrder::new();
            while let Some(Ok(msg)) = incoming.next().await {
                let checked =
                    FromSandbox::check(msg, &b).and_then(|m| order.request(&m).map(|()| m));
                let answer = match checked {
                    Err(e) => {
                        refusals.lock().unwrap().push(e.to_string());
                        let _ = tx.send(Err(Status::invalid_argument(e.to_string()))).await;
                        return;
                    }
                    Ok(FromSandbox::Hello { .. }) => FromSupervisor::Welcome { launch: None },
                    Ok(FromSandbox::Dns { request_id, .. }) => FromSupervisor::Dns {
                        request_id,
                        packet: Vec::new(),
                    },
                    Ok(_) => return,
                };
                order.answer(&answer).unwrap();
                if tx.send(Ok(answer.to_pb(&b))).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn relay(
        &self,
        request: Request<Streaming<pb::RelayUp>>,
    ) -> Result<Response<Self::RelayStream>, Status> {
        let mut incoming = request.into_inner();
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(async move {
            let b = binding();
            let mut up = RelayOrder::new();
            let mut stall = false;
            while !stall {
                let msg = match incoming.next().await {
                    Some(Ok(msg)) => msg,
                    // The codec's refusal (a message over the limit) goes
                    // back as the stream's status.
                    Some(Err(status)) => {
                        let _ = tx.send(Err(status)).await;
                        return;
                    }
                    None => return,
                };
                let Ok(m) = RelayUpKind::check(msg, &b) else {
                    return;
                };
                if up.up(&m).is_err() {
                    return;
                }
                let down = match m {
                    RelayUpKind::Connect { destination, .. } => match destination.port() {
                        443 => RelayDownKind::Connected,
                        444 => {
                            stall = true;
                            RelayDownKind::Connected
                        }
                        _ => RelayDownKind::Refused(13),
                    },
                    RelayUpKind::Data(d) => RelayDownKind::Data(d),
                    RelayUpKind::ShutdownWrite => RelayDownKind::ShutdownWrite,
                };
                if tx.send(Ok(down.to_pb(&b))).await.is_err() {
                    return;
                }
            }
            // A stalled stream keeps its half open and reads nothing more.
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(incoming);
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

async fn pair() -> (
    BrokerClient<tonic::transport::Channel>,
    Arc<Mutex<Vec<String>>>,
) {
    let (sandbox_end, supervisor_end) = tokio::net::UnixStream::pair().unwrap();
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let supervisor = TestSupervisor {
        refusals: Arc::clone(&refusals),
    };
    tokio::spawn(transport::serve(supervisor, supervisor_end, Link::Local));
    (
        transport::client(sandbox_end, Link::Local).await.unwrap(),
        refusals,
    )
}

fn caller() -> Caller {
    Caller {
        pid: 2,
        tid: 2,
        exe: b"/usr/bin/curl".to_vec(),
        exe_deleted: false,
        exe_sha256: None,
        foreign_code: None,
        writable_tree: None,
    }
}

fn connect(port: u16) -> RelayUpKind {
    RelayUpKind::Connect {
        caller: caller(),
        destination: std::net::SocketAddr::from(([192, 0, 2, 1], port)),
    }
}

fn dns(id: u64) -> FromSandbox {
    FromSandbox::Dns {
        request_id: NonZeroU64::new(id).unwrap(),
        caller: Some(caller()),
        transport: pb::Transport::Udp,
        packet: vec![0; 12],
    }
}

fn hello() -> FromSandbox {
    FromSandbox::Hello {
        bundle_digest: Some(format!("sha256:{}", "0".repeat(64))),
    }
}

/// Opens a relay with a connect to `port`; returns its sender and the
/// answers.
async fn relay(
    client: &mut BrokerClient<tonic::transport::Channel>,
    port: u16,
) -> (mpsc::Sender<pb::RelayUp>, Streaming<pb::RelayDown>) {
    let (tx, rx) = mpsc::channel(1);
    tx.send(connect(port).to_pb(&binding())).await.unwrap();
    let down = client
        .relay(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, down)
}

/// The next message of a relay stream, checked and in order.
async fn next_down(down: &mut Streaming<pb::RelayDown>, order: &mut RelayOrder) -> RelayDownKind {
    let m = down.next().await.unwrap().unwrap();
    let m = RelayDownKind::check(m, &binding()).unwrap();
    order.down(&m).unwrap();
    m
}

#[tokio::test]
async fn a_connect_is_decided_and_its_bytes_relayed() {
    let (mut client, _) = pair().await;
    let b = binding();
    let (tx, rx) = mpsc::channel(4);
    tx.send(hello().to_pb(&b)).await.unwrap();
    let mut answers = client
        .control(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let welcome = FromSupervisor::check(answers.next().await.unwrap().unwrap(), &b).unwrap();
    assert_eq!(welcome, FromSupervisor::Welcome { launch: None });
    let (_, mut refused) = relay(&mut client, 80).await;
    assert_eq!(
        next_down(&mut refused, &mut RelayOrder::new()).await,
        RelayDownKind::Refused(13)
    );
    let (up, mut down) = relay(&mut client, 443).await;
    let mut order = RelayOrder::new();
    assert_eq!(
        next_down(&mut down, &mut order).await,
        RelayDownKind::Connected
    );
    up.send(RelayUpKind::Data(b"hello".to_vec()).to_pb(&b))
        .await
        .unwrap();
    up.send(RelayUpKind::ShutdownWrite.to_pb(&b)).await.unwrap();
    let mut got = Vec::new();
    loop {
        match next_down(&mut down, &mut order).await {
            RelayDownKind::Data(d) => got.extend(d),
            RelayDownKind::ShutdownWrite => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, b"hello");
}

#[tokio::test]
async fn a_stalled_relay_holds_up_no_other() {
    let (mut client, _) = pair().await;
    let b = binding();
    let (stalled, _stalled_down) = relay(&mut client, 444).await;
    // Fill the stalled stream until its sends stop completing: HTTP/2's
    // window for that stream is full.
    let chunk = RelayUpKind::Data(vec![7; MAX_CHUNK]).to_pb(&b);
    let mut sent = 0_usize;
    loop {
        let send = stalled.send(chunk.clone());
        match tokio::time::timeout(Duration::from_millis(300), send).await {
            Ok(r) => {
                r.unwrap();
                sent += MAX_CHUNK;
                assert!(sent < 64 << 20, "the stalled stream never pushed back");
            }
            Err(_) => break,
        }
    }
    // Another stream on the same connection still flows.
    let (up, mut down) = relay(&mut client, 443).await;
    up.send(RelayUpKind::Data(b"ping".to_vec()).to_pb(&b))
        .await
        .unwrap();
    let mut order = RelayOrder::new();
    let echoed = tokio::time::timeout(Duration::from_secs(5), async {
        next_down(&mut down, &mut order).await;
        next_down(&mut down, &mut order).await
    })
    .await
    .expect("the other stream is not held up");
    assert_eq!(echoed, RelayDownKind::Data(b"ping".to_vec()));
}

#[tokio::test]
async fn a_message_of_another_generation_ends_the_stream_and_is_logged() {
    let (mut client, refusals) = pair().await;
    let stale = Binding {
        generation: 0,
        ..binding()
    };
    let (tx, rx) = mpsc::channel(4);
    tx.send(hello().to_pb(&stale)).await.unwrap();
    let mut answers = client
        .control(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let status = answers.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("generation 0"), "{status:?}");
    assert_eq!(refusals.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_request_before_the_hello_is_refused() {
    let (mut client, refusals) = pair().await;
    let (tx, rx) = mpsc::channel(4);
    tx.send(dns(1).to_pb(&binding())).await.unwrap();
    let mut answers = client
        .control(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let status = answers.next().await.unwrap().unwrap_err();
    assert!(status.message().contains("before the Hello"), "{status:?}");
    assert_eq!(refusals.lock().unwrap().len(), 1);
}

/// A client without the protocol's limits, as a faulty or hostile
/// sandbox would be.
async fn unlimited_client(io: tokio::net::UnixStream) -> BrokerClient<tonic::transport::Channel> {
    let once = Arc::new(Mutex::new(Some(io)));
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let io = once.lock().unwrap().take();
        async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(io.unwrap())) }
    });
    let channel = tonic::transport::Endpoint::from_static("http://sandbox.invalid")
        .connect_with_connector(connector)
        .await
        .unwrap();
    BrokerClient::new(channel)
}

/// The connect, then one relay message of `len` data bytes, sent raw.
fn oversized(len: usize) -> ReceiverStream<pb::RelayUp> {
    let b = binding();
    let (tx, rx) = mpsc::channel(2);
    tx.try_send(connect(443).to_pb(&b)).unwrap();
    tx.try_send(pb::RelayUp {
        binding: Some(b.to_pb()),
        kind: Some(pb::relay_up::Kind::Data(vec![0; len])),
    })
    .unwrap();
    ReceiverStream::new(rx)
}

/// The first error of a relay call, whether at its start or on its stream.
async fn first_error(outcome: Result<Response<Streaming<pb::RelayDown>>, Status>) -> Status {
    match outcome {
        Err(status) => status,
        Ok(response) => {
            let mut down = response.into_inner();
            loop {
                match down.next().await {
                    Some(Err(status)) => break status,
                    Some(Ok(_)) => {}
                    None => panic!("the stream ended without refusing the message"),
                }
            }
        }
    }
}

#[tokio::test]
async fn a_message_over_the_limit_is_refused_by_either_codec() {
    let too_long = sandbox_protocol::MAX_MESSAGE + 1;
    // The sandbox's own client does not send it.
    let (mut client, _) = pair().await;
    let refused = first_error(client.relay(oversized(too_long)).await).await;
    assert_ne!(refused.code(), tonic::Code::Ok);
    // The supervisor does not read it from a client without limits.
    let (sandbox_end, supervisor_end) = tokio::net::UnixStream::pair().unwrap();
    let supervisor = TestSupervisor {
        refusals: Arc::new(Mutex::new(Vec::new())),
    };
    tokio::spawn(transport::serve(supervisor, supervisor_end, Link::Local));
    let mut raw = unlimited_client(sandbox_end).await;
    let refused = first_error(raw.relay(oversized(too_long)).await).await;
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
}
