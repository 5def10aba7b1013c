//! The workload's standard streams.
//!
//! By default the workload inherits the supervisor's stdin, stdout and
//! stderr (a terminal stays a terminal). With `--transcript FILE` its
//! stdout and stderr are pipes that the supervisor copies both to its own
//! streams and, in arrival order, to FILE.
//!
//! A standard stream that is an unconnected IP socket is refused
//! ([`sandbox::stdio`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::LaunchError;

/// Pipes to the workload's stdout and stderr, and the threads copying them.
#[derive(Debug)]
pub struct Transcript {
    /// The write ends, for the child (closed in the parent after the fork).
    pub child_out: OwnedFd,
    pub child_err: OwnedFd,
    relays: Vec<JoinHandle<()>>,
}

impl Transcript {
    pub fn start(path: &Path) -> Result<Self, LaunchError> {
        let file =
            File::create(path).map_err(LaunchError::io(format!("create `{}`", path.display())))?;
        let file = Arc::new(Mutex::new(file));
        let (out_r, child_out) = io::pipe().map_err(LaunchError::io("create a pipe"))?;
        let (err_r, child_err) = io::pipe().map_err(LaunchError::io("create a pipe"))?;
        let relays = vec![
            relay(out_r, io::stdout(), Arc::clone(&file)),
            relay(err_r, io::stderr(), file),
        ];
        Ok(Self {
            child_out: child_out.into(),
            child_err: child_err.into(),
            relays,
        })
    }

    /// Waits until every writer (the workload and anything it started) has
    /// closed the pipes.
    pub fn finish(self) {
        drop((self.child_out, self.child_err));
        for relay in self.relays {
            let _ = relay.join();
        }
    }
}

fn relay(
    mut from: io::PipeReader,
    mut to: impl Write + Send + 'static,
    file: Arc<Mutex<File>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = vec![0_u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let chunk = buf.get(..n).unwrap_or_default();
            let _ = to.write_all(chunk);
            let _ = to.flush();
            if let Ok(mut f) = file.lock() {
                let _ = f.write_all(chunk);
            }
        }
    })
}

/// Refuses standard streams that are unconnected (or datagram) IP sockets
/// ([`sandbox::stdio`]).
pub fn check_inherited() -> Result<(), LaunchError> {
    sandbox::stdio::check_inherited().map_err(LaunchError::Usage)
}
