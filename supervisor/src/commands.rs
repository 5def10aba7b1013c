//! Further commands run in an attached sandbox (`ExecRequest`): each is
//! asked on the control stream in use, and its Exec stream, which the
//! sandbox opens, is handed to whoever asked, as [`Event`]s.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prost::Message as _;
use sandbox_protocol::{
    Binding, ControlOrder, ExecDownKind, ExecOrder, ExecRequest, ExecUpKind, FromSupervisor,
    MAX_MESSAGE, pb,
};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tonic::{Status, Streaming};

/// What a further command does, as its Exec stream tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// It runs.
    Started,
    /// It could not be started.
    Failed(String),
    /// Bytes of its standard output.
    Stdout(Vec<u8>),
    /// Bytes of its standard error.
    Stderr(Vec<u8>),
    /// It ended.
    Exited {
        /// 0 to 255; 128 + n for signal n.
        status: u8,
        /// Killed at its timeout.
        timed_out: bool,
    },
}

/// A command to run.
#[derive(Debug, Clone, Default)]
pub struct Command {
    /// Program first.
    pub argv: Vec<String>,
    /// `NAME=VALUE` entries added to the workload's environment.
    pub env: Vec<String>,
    /// Where it starts; `None`: where the workload did.
    pub workdir: Option<String>,
    /// Killed after this long.
    pub timeout: Option<Duration>,
}

/// Events of one command, in order; the stream ends after its last.
pub type Events = mpsc::Receiver<Event>;

/// Events queued per command before its sandbox's stream is no longer
/// read.
const EVENTS_QUEUE: usize = 16;

/// The control stream's sending half, once the workload runs.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub tx: mpsc::Sender<Result<pb::SupervisorMessage, Status>>,
    pub order: Arc<Mutex<ControlOrder>>,
}

/// The commands asked of one sandbox, across its attachments.
#[derive(Debug, Default)]
pub struct Commands {
    control: Mutex<Option<Control>>,
    next_id: AtomicU64,
    /// Commands asked whose Exec stream has not come yet.
    waiting: Mutex<HashMap<u64, mpsc::Sender<Event>>>,
}

impl Commands {
    /// Commands go on `control` from now on.
    pub(crate) fn attach(&self, control: Control) {
        *self.control.lock().unwrap_or_else(PoisonError::into_inner) = Some(control);
    }

    /// The control stream of `tx` ended: commands asked on it and not
    /// started never will be. A later attachment's stays.
    pub(crate) fn detach(&self, tx: &mpsc::Sender<Result<pb::SupervisorMessage, Status>>) {
        let mut control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        if control.as_ref().is_some_and(|c| c.tx.same_channel(tx)) {
            *control = None;
            self.waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        }
    }

    /// Asks the sandbox bound to `binding` to run `command`; its events
    /// come on the receiver.
    ///
    /// # Errors
    /// Why it was not asked: no sandbox attached with its workload
    /// running, or a command too large for one message.
    pub async fn run(&self, binding: &Binding, command: &Command) -> Result<Events, String> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst) + 1;
        let exec_id = NonZeroU64::new(id).ok_or("no command id left")?;
        let request = FromSupervisor::Exec(ExecRequest {
            exec_id,
            argv: command.argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
            env: command.env.iter().map(|e| e.as_bytes().to_vec()).collect(),
            workdir: command.workdir.as_ref().map(|w| w.as_bytes().to_vec()),
            timeout: command.timeout,
        });
        let message = request.to_pb(binding);
        let size = message.encoded_len();
        if size > MAX_MESSAGE {
            return Err(format!(
                "the command and its environment take {size} bytes, over the protocol's {MAX_MESSAGE}"
            ));
        }
        let control = self
            .control
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or("the sandbox is not attached with its workload running")?;
        let (tx, rx) = mpsc::channel(EVENTS_QUEUE);
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        let recorded = control
            .order
            .lock()
            .map_err(|_| "the control stream's state is lost".to_owned())
            .and_then(|mut o| o.answer(&request).map_err(|e| e.to_string()));
        let sent = match recorded {
            Ok(()) => control
                .tx
                .send(Ok(message))
                .await
                .map_err(|_| "the control stream ended".to_owned()),
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            self.waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            return Err(e);
        }
        Ok(rx)
    }

    /// Serves an Exec stream the sandbox opened: its first message names
    /// the command, whose events it then carries; a command nobody
    /// follows any more is cancelled.
    pub(crate) async fn serve(
        self: Arc<Self>,
        mut incoming: Streaming<pb::ExecUp>,
        binding: Binding,
        down: mpsc::Sender<Result<pb::ExecDown, Status>>,
    ) {
        let mut order = ExecOrder::new();
        let mut checked = |msg| {
            let m = ExecUpKind::check(msg, &binding)?;
            order.up(&m).map(|()| m)
        };
        let mut events: Option<mpsc::Sender<Event>> = None;
        loop {
            let message = match incoming.next().await.map(|m| m.map(&mut checked)) {
                Some(Ok(Ok(m))) => m,
                Some(Ok(Err(e))) => {
                    let _ = down
                        .send(Err(Status::invalid_argument(e.to_string())))
                        .await;
                    return;
                }
                // The stream ended before the command's end: the
                // receiver sees its events stop.
                _ => return,
            };
            // The order puts the start (or the failure) first: it names
            // the command.
            if let ExecUpKind::Started(id) | ExecUpKind::Failed { exec_id: id, .. } = &message {
                let id = id.get();
                let taken = self
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                if taken.is_none() {
                    let why = format!("no command {id} was asked, or its stream came already");
                    let _ = down.send(Err(Status::failed_precondition(why))).await;
                    return;
                }
                events = taken;
            }
            let Some(events) = &events else {
                return;
            };
            let (event, last) = match message {
                ExecUpKind::Started(_) => (Event::Started, false),
                ExecUpKind::Failed { reason, .. } => (Event::Failed(reason), true),
                ExecUpKind::Stdout(d) => (Event::Stdout(d), false),
                ExecUpKind::Stderr(d) => (Event::Stderr(d), false),
                ExecUpKind::Exited { status, timed_out } => {
                    (Event::Exited { status, timed_out }, true)
                }
            };
            if events.send(event).await.is_err() {
                let _ = down.send(Ok(ExecDownKind::Cancel.to_pb(&binding))).await;
                return;
            }
            if last {
                return;
            }
        }
    }
}
