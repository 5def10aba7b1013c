//! `openshell-gateway serve` as a process of its own.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use bundle_trust::client::Client;

const GATEWAY: &str = env!("CARGO_BIN_EXE_openshell-gateway");

pub struct Proc {
    pub child: Child,
    pub url: String,
    pub admin: Client,
    /// Its standard error (the access log among it), in a file: a pipe
    /// nobody reads would stop the gateway once full.
    pub log: std::path::PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Serves `dir` on `db`: the process, once it printed where it listens;
/// its exit and standard error when it did not start.
pub fn serve(dir: &Path, listen: &str, db: &str, approval: &str) -> Result<Proc, Output> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = dir.join(format!("serve-{n}.log"));
    let mut child = Command::new(GATEWAY)
        .args([
            "serve",
            "--dir",
            dir.to_str().unwrap(),
            "--listen",
            listen,
            "--db",
            db,
            "--approval",
            approval,
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.is_empty() {
        let status = child.wait().unwrap();
        return Err(Output {
            status,
            stdout: Vec::new(),
            stderr: std::fs::read(&log).unwrap(),
        });
    }
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    let ca = std::fs::read(dir.join("ca.pem")).unwrap();
    let token = std::fs::read_to_string(dir.join("admin.token")).unwrap();
    let admin = Client::new(&url, &ca, &token).unwrap();
    Ok(Proc {
        child,
        url,
        admin,
        log,
    })
}
