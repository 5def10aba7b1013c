//! The order of each stream: what may come first, what may follow, and
//! which answers match an outstanding request.

use std::collections::HashMap;

use crate::check::{
    ExecUpKind, FromSandbox, FromSupervisor, ProtocolError, RelayDownKind, RelayUpKind,
};

/// The most requests outstanding at once on one control stream; a
/// sandbox that asks more without answers is refused, not buffered.
pub const MAX_OUTSTANDING: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    Dns,
    Datagram,
}

fn request_of(m: &FromSandbox) -> Option<(u64, Request)> {
    match m {
        FromSandbox::Hello { .. }
        | FromSandbox::Refusal(_)
        | FromSandbox::Evidence(_)
        | FromSandbox::Ended(_) => None,
        FromSandbox::Dns { request_id, .. } => Some((request_id.get(), Request::Dns)),
        FromSandbox::Datagram { request_id, .. } => Some((request_id.get(), Request::Datagram)),
    }
}

/// The control stream's order, kept by either side: a greeting first and
/// once, then requests with ids not already outstanding, each answered
/// once by an answer of its kind.
#[derive(Debug, Default)]
pub struct ControlOrder {
    greeted: bool,
    /// The Hello had no digest: its Welcome must carry the launch.
    waiting: bool,
    welcomed: bool,
    /// The Evidence came, and whether its Go did.
    evidence: bool,
    went: bool,
    /// The workload's end was reported: nothing follows.
    ended: bool,
    outstanding: HashMap<u64, Request>,
    /// The last further command's id.
    last_exec: u64,
}

impl ControlOrder {
    /// A stream before its first message.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A request goes out or comes in (both sides record the same). A
    /// refusal report needs no answer; like every request, it comes after
    /// the Hello.
    pub fn request(&mut self, m: &FromSandbox) -> Result<(), ProtocolError> {
        if self.ended {
            return Err(ProtocolError::Order("a message after Ended"));
        }
        if matches!(m, FromSandbox::Ended(_)) {
            if !self.greeted {
                return Err(ProtocolError::Order("Ended before the Hello"));
            }
            self.ended = true;
            return Ok(());
        }
        if matches!(m, FromSandbox::Evidence(_)) {
            if !self.greeted {
                return Err(ProtocolError::Order("Evidence before the Hello"));
            }
            if self.evidence {
                return Err(ProtocolError::Order("a second Evidence"));
            }
            self.evidence = true;
            return Ok(());
        }
        if matches!(m, FromSandbox::Refusal(_)) {
            return if self.greeted {
                Ok(())
            } else {
                Err(ProtocolError::Order("a request before the Hello"))
            };
        }
        let Some((id, kind)) = request_of(m) else {
            if self.greeted {
                return Err(ProtocolError::Order("a second Hello"));
            }
            self.greeted = true;
            self.waiting = matches!(
                m,
                FromSandbox::Hello {
                    bundle_digest: None
                }
            );
            return Ok(());
        };
        if !self.greeted {
            return Err(ProtocolError::Order("a request before the Hello"));
        }
        if self.outstanding.len() >= MAX_OUTSTANDING {
            return Err(ProtocolError::Order("too many requests outstanding"));
        }
        if self.outstanding.insert(id, kind).is_some() {
            return Err(ProtocolError::Order("a request id already outstanding"));
        }
        Ok(())
    }

    /// An answer goes out or comes in; on the sandbox's side, answers
    /// before the `Welcome` are refused.
    pub fn answer(&mut self, m: &FromSupervisor) -> Result<(), ProtocolError> {
        let (id, kind) = match m {
            FromSupervisor::Welcome { launch } => return self.welcome(launch.is_some()),
            FromSupervisor::Go => return self.go(),
            FromSupervisor::Exec(e) => return self.exec(e.exec_id.get()),
            FromSupervisor::Dns { request_id, .. } => (request_id.get(), Request::Dns),
            FromSupervisor::Datagram { request_id, .. } => (request_id.get(), Request::Datagram),
        };
        if !self.welcomed {
            return Err(ProtocolError::Order("an answer before the Welcome"));
        }
        match self.outstanding.get(&id) {
            Some(k) if *k == kind => {
                self.outstanding.remove(&id);
                Ok(())
            }
            Some(_) => Err(ProtocolError::Order(
                "an answer of another kind than its request",
            )),
            None => Err(ProtocolError::Order("an answer to no outstanding request")),
        }
    }

    /// The supervisor's greeting: after the Hello, once, with a launch
    /// exactly when the Hello waits for one. A sandbox that has its plan
    /// must not be handed another, and one that waits runs nothing
    /// without it.
    fn welcome(&mut self, launch: bool) -> Result<(), ProtocolError> {
        if !self.greeted {
            return Err(ProtocolError::Order("a Welcome before the Hello"));
        }
        if self.welcomed {
            return Err(ProtocolError::Order("a second Welcome"));
        }
        if self.waiting && !launch {
            return Err(ProtocolError::Order(
                "a Welcome without the launch the Hello waits for",
            ));
        }
        if !self.waiting && launch {
            return Err(ProtocolError::Order(
                "a Welcome with a launch, to a sandbox that has its plan",
            ));
        }
        self.welcomed = true;
        Ok(())
    }

    /// The answer to the Evidence: after the Welcome and the Evidence,
    /// once.
    fn go(&mut self) -> Result<(), ProtocolError> {
        if !self.welcomed || !self.evidence {
            return Err(ProtocolError::Order(
                "a Go before the Welcome and the Evidence",
            ));
        }
        if self.went {
            return Err(ProtocolError::Order("a second Go"));
        }
        self.went = true;
        Ok(())
    }

    /// A further command: once the workload was let go (a local run's,
    /// whose launch the supervisor watched, needs no Go), before its end,
    /// each id larger than the last.
    fn exec(&mut self, id: u64) -> Result<(), ProtocolError> {
        if !self.welcomed || (self.evidence && !self.went) {
            return Err(ProtocolError::Order(
                "an ExecRequest before the workload was let run",
            ));
        }
        if self.ended {
            return Err(ProtocolError::Order("an ExecRequest after Ended"));
        }
        if id <= self.last_exec {
            return Err(ProtocolError::Order(
                "an ExecRequest whose id is not larger than the last",
            ));
        }
        self.last_exec = id;
        Ok(())
    }

    /// Whether the Evidence has come (a supervisor that needs it refuses
    /// every other request before it).
    #[must_use]
    pub fn has_evidence(&self) -> bool {
        self.evidence
    }

    /// Requests still waiting for their answer.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }
}

/// A relay stream's order, one per direction: upward the connect question
/// first and once; downward the answer first (connected, or refused and
/// nothing after); then data, then at most one shutdown, after which
/// nothing.
#[derive(Debug, Default)]
pub struct RelayOrder {
    opened: bool,
    shut: bool,
}

impl RelayOrder {
    /// A stream before its first message.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A message from the sandbox.
    pub fn up(&mut self, m: &RelayUpKind) -> Result<(), ProtocolError> {
        match (m, self.opened) {
            (RelayUpKind::Connect { .. }, false) => {
                self.opened = true;
                Ok(())
            }
            (RelayUpKind::Connect { .. }, true) => {
                Err(ProtocolError::Order("a second connect on one stream"))
            }
            (_, false) => Err(ProtocolError::Order("relay data before the connect")),
            (RelayUpKind::Data(_), true) => self.data(),
            (RelayUpKind::ShutdownWrite, true) => self.shutdown(),
        }
    }

    /// A message from the supervisor.
    pub fn down(&mut self, m: &RelayDownKind) -> Result<(), ProtocolError> {
        match (m, self.opened) {
            (RelayDownKind::Connected, false) => {
                self.opened = true;
                Ok(())
            }
            (RelayDownKind::Refused(_) | RelayDownKind::OwnLoopback, false) => {
                self.opened = true;
                self.shut = true;
                Ok(())
            }
            (
                RelayDownKind::Connected | RelayDownKind::Refused(_) | RelayDownKind::OwnLoopback,
                true,
            ) => Err(ProtocolError::Order("a second answer on one stream")),
            (_, false) => Err(ProtocolError::Order("relay data before the answer")),
            (RelayDownKind::Data(_), true) => self.data(),
            (RelayDownKind::ShutdownWrite, true) => self.shutdown(),
            // A reset ends the stream whatever came before.
            (RelayDownKind::Reset(_), true) => {
                self.shut = true;
                Ok(())
            }
        }
    }

    fn data(&self) -> Result<(), ProtocolError> {
        if self.shut {
            return Err(ProtocolError::Order("data after the shutdown"));
        }
        Ok(())
    }

    fn shutdown(&mut self) -> Result<(), ProtocolError> {
        if self.shut {
            return Err(ProtocolError::Order("a second shutdown"));
        }
        self.shut = true;
        Ok(())
    }
}

/// An Exec stream's order, from the sandbox: whether the command started
/// first and once, then its output, then how it ended, and nothing after.
#[derive(Debug, Default)]
pub struct ExecOrder {
    started: bool,
    done: bool,
}

impl ExecOrder {
    /// A stream before its first message.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// A message from the sandbox.
    pub fn up(&mut self, m: &ExecUpKind) -> Result<(), ProtocolError> {
        if self.done {
            return Err(ProtocolError::Order("a message after the command's end"));
        }
        match (m, self.started) {
            (ExecUpKind::Started(_), false) => self.started = true,
            (ExecUpKind::Failed { .. }, false) => {
                self.started = true;
                self.done = true;
            }
            (ExecUpKind::Started(_) | ExecUpKind::Failed { .. }, true) => {
                return Err(ProtocolError::Order("a second start on one Exec stream"));
            }
            (_, false) => return Err(ProtocolError::Order("output before the start")),
            (ExecUpKind::Stdout(_) | ExecUpKind::Stderr(_), true) => {}
            (ExecUpKind::Exited { .. }, true) => self.done = true,
        }
        Ok(())
    }

    /// Whether the stream's last message came.
    #[must_use]
    pub fn done(&self) -> bool {
        self.done
    }
}
