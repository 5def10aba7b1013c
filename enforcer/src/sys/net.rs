//! Sockets: creating, connecting, options, interface flags.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::errno::{Errno, check_int};

/// `socket(domain, ty, protocol)`.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> Result<OwnedFd, Errno> {
    // SAFETY: socket takes three integers and returns a new fd.
    let fd = check_int(unsafe { libc::socket(domain, ty, protocol) })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `connect(sock, addr)` with `addr` a socket address in the kernel's
/// layout (`struct sockaddr_*`, its length the slice's).
pub(crate) fn connect(sock: BorrowedFd<'_>, addr: &[u8]) -> Result<(), Errno> {
    let len = libc::socklen_t::try_from(addr.len()).map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: `addr` is live for `len` bytes; connect only reads them, and
    // checks the family and length itself.
    check_int(unsafe { libc::connect(sock.as_raw_fd(), addr.as_ptr().cast(), len) }).map(drop)
}

/// `listen(sock, backlog)`.
pub(crate) fn listen(sock: BorrowedFd<'_>, backlog: libc::c_int) -> Result<(), Errno> {
    // SAFETY: listen takes no pointer; the fd is live for the call.
    check_int(unsafe { libc::listen(sock.as_raw_fd(), backlog) }).map(drop)
}

/// An `int`-valued socket option.
pub(crate) fn getsockopt_int(
    sock: BorrowedFd<'_>,
    level: libc::c_int,
    option: libc::c_int,
) -> Result<libc::c_int, Errno> {
    let mut value: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: `value` and `len` are live and writable, and `len` holds the
    // size of `value`, the most the kernel writes.
    let ret = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            option,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    check_int(ret)?;
    Ok(value)
}

/// The network namespace `sock` was created in (`SIOCGSKNS`), as an fd.
pub(crate) fn socket_netns(sock: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    // SAFETY: SIOCGSKNS takes no argument and returns a new fd.
    let fd = check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGSKNS) })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `ifreq` naming interface `name` (truncated to `IFNAMSIZ - 1` bytes,
/// so the name stays NUL-terminated).
fn ifreq(name: &[u8]) -> libc::ifreq {
    // SAFETY: an all-zero ifreq is valid plain data.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    let room = req.ifr_name.len().saturating_sub(1);
    for (dst, src) in req.ifr_name.iter_mut().take(room).zip(name) {
        *dst = libc::c_char::from_ne_bytes([*src]);
    }
    req
}

/// The flags of interface `name` (`SIOCGIFFLAGS`), asked through `sock`.
pub(crate) fn interface_flags(sock: BorrowedFd<'_>, name: &[u8]) -> Result<libc::c_short, Errno> {
    let mut req = ifreq(name);
    // SAFETY: SIOCGIFFLAGS reads the name from, and writes the flags into,
    // `req`, a live, initialised ifreq.
    check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut req) })?;
    // SAFETY: after SIOCGIFFLAGS the union holds the flags member (and
    // every member of a zeroed union is initialised anyway).
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// Sets the flags of interface `name` (`SIOCSIFFLAGS`).
pub(crate) fn set_interface_flags(
    sock: BorrowedFd<'_>,
    name: &[u8],
    flags: libc::c_short,
) -> Result<(), Errno> {
    let mut req = ifreq(name);
    req.ifr_ifru.ifru_flags = flags;
    // SAFETY: SIOCSIFFLAGS reads name and flags from `req`, live and
    // initialised.
    check_int(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &raw mut req) }).map(drop)
}
