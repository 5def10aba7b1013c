//! The sandbox's side of the protocol against a supervisor that greets it
//! and then never answers: every question fails once its time is up, and
//! nothing is allowed meanwhile; and a greeting whose launch does not
//! match what the Hello said is refused.
#![cfg(test)]

use std::pin::Pin;
use std::time::Duration;

use sandbox::relay::{RelayError, Supervisor};
use sandbox_protocol::pb::{self, broker_server::Broker};
use sandbox_protocol::transport::Link;
use sandbox_protocol::{Binding, Caller, FromSandbox, FromSupervisor, transport};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn binding() -> Binding {
    Binding {
        sandbox_id: "silent".into(),
        generation: 1,
    }
}

/// Welcomes the sandbox (with this launch, whatever its Hello said), then
/// reads everything and answers nothing.
struct Silent(Option<Vec<u8>>);

#[tonic::async_trait]
impl Broker for Silent {
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
        let (tx, rx) = mpsc::channel(4);
        let welcome = FromSupervisor::Welcome {
            launch: self.0.clone(),
        };
        tokio::spawn(async move {
            while let Some(Ok(msg)) = incoming.next().await {
                if let Ok(FromSandbox::Hello { .. }) = FromSandbox::check(msg, &binding()) {
                    let _ = tx.send(Ok(welcome.to_pb(&binding()))).await;
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
        while let Some(Ok(_)) = incoming.next().await {}
        Err(Status::unavailable("never answered"))
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_that_never_answers_gets_every_question_refused_in_time() {
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(transport::serve(Silent(None), theirs, Link::Local));
    let digest = format!("sha256:{}", "0".repeat(64));
    let limit = Duration::from_millis(300);
    let supervisor = Supervisor::attach(ours, Link::Local, binding(), Some(digest))
        .await
        .unwrap()
        .answer_within(limit);
    let connect = supervisor
        .connect(caller(), "192.0.2.1:443".parse().unwrap())
        .await;
    assert!(
        matches!(connect, Err(RelayError::TimedOut(_))),
        "{connect:?}"
    );
    let dns = supervisor.dns(None, pb::Transport::Udp, vec![0; 12]).await;
    assert!(matches!(dns, Err(RelayError::TimedOut(_))), "{dns:?}");
    let datagram = supervisor
        .datagram(caller(), "192.0.2.1:53".parse().unwrap(), vec![1])
        .await;
    assert!(
        matches!(datagram, Err(RelayError::TimedOut(_))),
        "{datagram:?}"
    );
}

/// The sandbox's attachment to a supervisor whose Welcome carries
/// `launch`, the sandbox's Hello saying `digest`.
async fn greeted(launch: Option<&[u8]>, digest: Option<String>) -> Result<Supervisor, RelayError> {
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(transport::serve(
        Silent(launch.map(<[u8]>::to_vec)),
        theirs,
        Link::Local,
    ));
    Supervisor::attach(ours, Link::Local, binding(), digest).await
}

fn refusal(attached: Result<Supervisor, RelayError>) -> String {
    match attached {
        Ok(_) => panic!("the greeting was accepted"),
        Err(e) => e.to_string(),
    }
}

/// A sandbox that has its plan is never handed another; one that waits
/// for its launch goes on only with one, which it keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_welcome_is_taken_only_with_a_launch_exactly_when_the_hello_waits_for_one() {
    let digest = format!("sha256:{}", "0".repeat(64));
    let refused = refusal(greeted(Some(b"{}"), Some(digest.clone())).await);
    assert!(
        refused.contains("a Welcome with a launch, to a sandbox that has its plan"),
        "{refused}"
    );
    let refused = refusal(greeted(None, None).await);
    assert!(
        refused.contains("a Welcome without the launch the Hello waits for"),
        "{refused}"
    );
    let waiting = greeted(Some(b"the launch"), None).await.unwrap();
    assert_eq!(waiting.launch(), Some(&b"the launch"[..]));
    let planful = greeted(None, Some(digest)).await.unwrap();
    assert_eq!(planful.launch(), None);
}
