//! Descriptors and paths: pipes, reads and writes, polling, flags.
//! Everything here but [`memfd_create`]'s caller and [`pass_fds`] (whose
//! hook is) is async-signal-safe.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::errno::{Errno, check, check_int};

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: pipe2 writes two fds into the live two-element array.
    check_int(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let [r, w] = fds;
    // SAFETY: pipe2 just returned `r` and nothing else owns it.
    let r = unsafe { OwnedFd::from_raw_fd(r) };
    // SAFETY: as for `r`.
    let w = unsafe { OwnedFd::from_raw_fd(w) };
    Ok((r, w))
}

/// One `read(2)` into `buf`: the byte count (0 at end of file).
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    // SAFETY: `buf` is live and writable for `buf.len()` bytes, the most
    // the kernel writes.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| Errno::last())
}

/// One `write(2)` from `bytes`: the byte count written.
pub(crate) fn write(fd: BorrowedFd<'_>, bytes: &[u8]) -> Result<usize, Errno> {
    // SAFETY: `bytes` is live and initialised for its length; write only
    // reads it.
    let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
    usize::try_from(n).map_err(|_| Errno::last())
}

/// Writes all of `bytes`, retrying on `EINTR` and short writes.
pub(crate) fn write_all(fd: BorrowedFd<'_>, bytes: &[u8]) -> Result<(), Errno> {
    let mut done = 0;
    while let Some(rest) = bytes.get(done..).filter(|r| !r.is_empty()) {
        match write(fd, rest) {
            Ok(n) => done += n,
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Polls one descriptor for `events`: `None` when `timeout_ms` (-1: no
/// limit) passed first, else the returned events.
pub(crate) fn poll_one(
    fd: BorrowedFd<'_>,
    events: libc::c_short,
    timeout_ms: libc::c_int,
) -> Result<Option<libc::c_short>, Errno> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    };
    // SAFETY: `pfd` is one live, initialised pollfd, and the count is 1.
    let n = check_int(unsafe { libc::poll(&raw mut pfd, 1, timeout_ms) })?;
    Ok((n != 0).then_some(pfd.revents))
}

/// The open file's status flags (`F_GETFL`: `O_NONBLOCK`...).
pub(crate) fn status_flags(fd: BorrowedFd<'_>) -> Result<libc::c_int, Errno> {
    // SAFETY: F_GETFL takes no third argument and only reads fd state.
    check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })
}

/// The descriptor's own flags (`F_GETFD`: `FD_CLOEXEC`).
pub(crate) fn descriptor_flags(fd: BorrowedFd<'_>) -> Result<libc::c_int, Errno> {
    // SAFETY: F_GETFD takes no third argument and only reads fd state.
    check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFD) })
}

/// `f_type` of the filesystem holding `fd` (`fstatfs`).
pub(crate) fn filesystem_type(fd: BorrowedFd<'_>) -> Result<i64, Errno> {
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `stat` is a writable statfs-sized buffer; the fd is live.
    check_int(unsafe { libc::fstatfs(fd.as_raw_fd(), stat.as_mut_ptr()) })?;
    // SAFETY: the buffer was zeroed, so every field is initialised, and
    // fstatfs succeeded, so the kernel filled it.
    let stat = unsafe { stat.assume_init() };
    Ok(stat.f_type)
}

/// `faccessat(AT_FDCWD, path, mode, flags)`.
pub(crate) fn access(path: &CStr, mode: libc::c_int, flags: libc::c_int) -> Result<(), Errno> {
    // SAFETY: `path` is NUL-terminated and lives across the call; faccessat
    // only reads it.
    check_int(unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), mode, flags) }).map(drop)
}

/// An anonymous memory file (`memfd_create`).
pub(crate) fn memfd_create(name: &CStr, flags: libc::c_uint) -> Result<OwnedFd, Errno> {
    // SAFETY: `name` is NUL-terminated and lives across the call.
    let fd = check_int(unsafe { libc::memfd_create(name.as_ptr(), flags) })?;
    // SAFETY: memfd_create just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Marks every fd from `first` up close-on-exec (`close_range` with
/// `CLOSE_RANGE_CLOEXEC`): nothing is closed, so no owner loses its fd.
pub(crate) fn mark_cloexec_from(first: u32) -> Result<(), Errno> {
    // SAFETY: close_range takes integers only; with CLOSE_RANGE_CLOEXEC it
    // closes nothing.
    check(unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    })
    .map(drop)
}

/// Closes `fd` in a forked child: the handle that owns it belongs to the
/// parent's copy of memory, and the child never drops it (it execs or
/// `_exit`s).
pub(crate) fn close_in_child(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: close takes an integer; no handle of this (child) process
    // will use or close the number again.
    check_int(unsafe { libc::close(fd.as_raw_fd()) }).map(drop)
}

/// Clears close-on-exec on `fd`, so that an `exec` hands it on.
pub(crate) fn clear_cloexec(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: F_SETFD takes a live fd and an integer flag word.
    check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) }).map(drop)
}

/// Sets close-on-exec on `fd`.
pub(crate) fn set_cloexec(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    // SAFETY: F_SETFD takes a live fd and an integer flag word.
    check_int(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

/// Takes ownership of `fd`, a descriptor this process was started with
/// (its number given on the command line), once it is known to be open.
pub(crate) fn take_inherited(fd: RawFd) -> Result<OwnedFd, Errno> {
    if fd < 3 {
        return Err(Errno(libc::EBADF));
    }
    // SAFETY: F_GETFD takes an integer and only reports the fd's flags.
    check_int(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: `fd` is open (above) and no handle of this process owns it:
    // it was inherited across `exec`, and the caller takes it only once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens `path` as `O_PATH | O_CLOEXEC`: a reference to the file, to
/// execute or to name, that reads nothing.
pub(crate) fn open_path(path: &CStr) -> Result<OwnedFd, Errno> {
    // SAFETY: `path` is NUL-terminated and lives across the call.
    let fd = check_int(unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    // SAFETY: open just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `chdir(path)`.
pub(crate) fn chdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: `path` is NUL-terminated and lives across the call.
    check_int(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// Makes `command`'s child hold `fds` as descriptors 3, 4, ... across its
/// `exec`. `fds` are closed here when `command` is dropped.
pub(crate) fn pass_fds(
    command: &mut std::process::Command,
    fds: Vec<OwnedFd>,
) -> Result<(), Errno> {
    use std::os::unix::process::CommandExt as _;
    let count = libc::c_int::try_from(fds.len()).map_err(|_| Errno(libc::EMFILE))?;
    // Above every target, so that no copy overwrites a descriptor still
    // to be moved.
    let above = count.checked_add(3).ok_or(Errno(libc::EMFILE))?;
    let mut moved: Vec<libc::c_int> = vec![-1; fds.len()];
    let hook = move || -> std::io::Result<()> {
        for (fd, slot) in fds.iter().zip(moved.iter_mut()) {
            // SAFETY: F_DUPFD_CLOEXEC takes a live fd (`fds` holds it) and
            // an integer; the copy is closed by the exec.
            *slot = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, above) };
            if *slot < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        for (target, fd) in (3..).zip(moved.iter()) {
            // SAFETY: dup2 takes two integers; `fd` is the live copy made
            // above. Whatever the child had at `target` belongs to no
            // handle it uses again before its exec.
            if unsafe { libc::dup2(*fd, target) } < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before `exec`; it makes
    // only async-signal-safe calls (fcntl, dup2) and allocates nothing
    // (`moved` is allocated here, `last_os_error` does not allocate).
    unsafe { command.pre_exec(hook) };
    Ok(())
}
