//! Fork, pipe and temp-dir helpers shared by the kernel tests.
//!
//! A child reports its result as an exit status: 0 for success, a small
//! number naming the check that failed otherwise, 101 for a panic. Each test
//! binary uses a different subset of these helpers.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How a child ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Forks; the child runs `body` and `_exit`s with its return value (101 if
/// it panics). Returns the child's pid.
pub fn fork_child(body: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: fork has no memory-safety preconditions; the child only runs the test body and exits, as a forked test process does.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
        // SAFETY: _exit ends the forked child without running the parent's destructors twice.
        unsafe { libc::_exit(code) };
    }
    pid
}

/// Waits for `pid` (our child, or an orphan we reap); kills it and fails
/// the test if it has not ended within a minute, so a child stuck in an
/// unanswered notification cannot hang CI.
pub fn wait(pid: libc::pid_t) -> Exit {
    if let Some(exit) = eventually(Duration::from_secs(60), || try_wait(pid)) {
        return exit;
    }
    kill(pid);
    let mut status = 0;
    // SAFETY: `status` is a live local the kernel writes one int into.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    panic!("child {pid} hung");
}

/// Non-blocking wait: `None` while the child runs.
pub fn try_wait(pid: libc::pid_t) -> Option<Exit> {
    let mut status = 0;
    // SAFETY: `status` is a live local the kernel writes one int into.
    let ret = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    assert!(
        ret >= 0,
        "waitpid failed: {}",
        std::io::Error::last_os_error()
    );
    (ret == pid).then(|| decode(status))
}

fn decode(status: i32) -> Exit {
    if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else {
        Exit::Signal(libc::WTERMSIG(status))
    }
}

pub fn kill(pid: libc::pid_t) {
    // SAFETY: kill takes plain integers; `pid` is a child this test forked.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// A pipe as (read end, write end), close-on-exec.
pub fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a two-int array the kernel fills.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Writes a u32 with one `write(2)`; usable in a child.
pub fn write_u32(fd: &OwnedFd, value: u32) -> bool {
    let bytes = value.to_ne_bytes();
    // SAFETY: `bytes` is a live 4-byte array and `fd` is borrowed open for the call.
    unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), 4) == 4 }
}

/// Reads a u32 with `read(2)`; `None` on EOF, error, or 30 s of silence
/// (a child forked by a parallel test may hold a copy of the write end, so
/// EOF alone is not a reliable signal). Usable in a child.
pub fn read_u32(fd: &OwnedFd) -> Option<u32> {
    let mut bytes = [0_u8; 4];
    let mut got = 0;
    while got < 4 {
        if !readable(fd, Duration::from_secs(30)) {
            return None;
        }
        // SAFETY: the pointer and length stay within `bytes`, and `fd` is borrowed open.
        let n = unsafe { libc::read(fd.as_raw_fd(), bytes[got..].as_mut_ptr().cast(), 4 - got) };
        if n <= 0 {
            return None;
        }
        got += n as usize;
    }
    Some(u32::from_ne_bytes(bytes))
}

/// Waits up to `timeout` for `fd` to be readable.
pub fn readable(fd: &impl AsRawFd, timeout: Duration) -> bool {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `pfd` is one live pollfd, matching the count of 1.
    unsafe { libc::poll(&mut pfd, 1, ms) == 1 && pfd.revents & libc::POLLIN != 0 }
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// True when a libc call returned -1 with `expected` errno.
pub fn failed_with(ret: impl TryInto<i64>, expected: i32) -> bool {
    let saved = errno();
    ret.try_into().ok() == Some(-1) && saved == expected
}

pub fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).unwrap()
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("enforcer-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `f` until it returns `Some` or `timeout` passes.
pub fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Skips the test, loudly, when the kernel's Landlock ABI is below `abi`.
pub fn landlock_abi_at_least(abi: u8) -> bool {
    let have = enforcer::kernel_abi().unwrap();
    if have < abi {
        eprintln!("SKIPPED: this test needs Landlock ABI {abi}, the kernel has {have}");
        return false;
    }
    true
}

/// The product's filter: the deny and notify lists every compiled bundle
/// carries (`policy_bundle::kernel`), converted by the supervisor's own
/// conversion (`supervisor::seccomp_filter`, what `run` installs), so a
/// test that passes here passes for the filter that ships.
pub fn product_filter() -> enforcer::FilterSpec {
    supervisor::seccomp_filter(&policy_bundle::SeccompTable {
        deny: policy_bundle::kernel::deny_list(),
        notify: policy_bundle::kernel::notify_list(),
        identities: Vec::new(),
        routes: Vec::new(),
    })
    .unwrap()
}
