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

/// A connected pair of `AF_UNIX` `SOCK_SEQPACKET` sockets, close-on-exec:
/// each write is one message, read whole, and descriptors travel with it.
pub(crate) fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd), Errno> {
    let mut fds = [-1 as libc::c_int; 2];
    // SAFETY: `fds` is live and writable for the two ints socketpair writes.
    check_int(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    let [a, b] = fds;
    // SAFETY: the kernel just returned both fds and nothing else owns them.
    let a = unsafe { OwnedFd::from_raw_fd(a) };
    // SAFETY: as above.
    let b = unsafe { OwnedFd::from_raw_fd(b) };
    Ok((a, b))
}

/// Room for one descriptor's `SCM_RIGHTS` control message, aligned as
/// `struct cmsghdr` needs.
#[repr(C)]
union OneFdControl {
    header: libc::cmsghdr,
    bytes: [u8; 24],
}

/// Sends `bytes` as one message on `sock`, with `fd` attached
/// (`SCM_RIGHTS`) when given.
pub(crate) fn send_with_fd(
    sock: BorrowedFd<'_>,
    bytes: &[u8],
    fd: Option<BorrowedFd<'_>>,
) -> Result<(), Errno> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    let mut control = OneFdControl { bytes: [0; 24] };
    // SAFETY: an all-zero msghdr is valid plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) };
        msg.msg_control = (&raw mut control).cast();
        msg.msg_controllen = space as usize;
        // SAFETY: `msg` points at `control`, large enough for one cmsghdr
        // and one int, so CMSG_FIRSTHDR returns a pointer into it.
        let header = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
        if header.is_null() {
            return Err(Errno(libc::EINVAL));
        }
        let header_value = libc::cmsghdr {
            // SAFETY: CMSG_LEN only computes a size.
            cmsg_len: unsafe { libc::CMSG_LEN(size_of::<libc::c_int>() as u32) } as usize,
            cmsg_level: libc::SOL_SOCKET,
            cmsg_type: libc::SCM_RIGHTS,
        };
        // SAFETY: `header` points at the start of `control`, aligned for and
        // large enough to hold a cmsghdr.
        unsafe { header.write(header_value) };
        // SAFETY: CMSG_DATA of a header inside `control` points at the int
        // right after it, still inside `control`.
        let data = unsafe { libc::CMSG_DATA(header) };
        // SAFETY: `data` has room for one int (CMSG_SPACE above); it may be
        // unaligned, hence the unaligned write.
        unsafe { data.cast::<libc::c_int>().write_unaligned(fd.as_raw_fd()) };
    }
    loop {
        // SAFETY: `msg` points at `iov` (over `bytes`) and `control`, all
        // live across the call; sendmsg only reads them.
        let ret = unsafe { libc::sendmsg(sock.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
        match crate::errno::check(ret as libc::c_long) {
            Ok(n) if usize::try_from(n) == Ok(bytes.len()) => return Ok(()),
            Ok(_) => return Err(Errno(libc::EMSGSIZE)),
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Receives one message on `sock` into `buf`: its length (0 at EOF) and
/// the descriptor attached to it, if any (close-on-exec). A message with
/// more than one descriptor, or cut short, is refused.
pub(crate) fn recv_with_fd(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
) -> Result<(usize, Option<OwnedFd>), Errno> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = OneFdControl { bytes: [0; 24] };
    // SAFETY: an all-zero msghdr is valid plain data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&raw mut control).cast();
    msg.msg_controllen = size_of::<OneFdControl>();
    let n = loop {
        // SAFETY: `msg` points at `iov` (over `buf`) and `control`, live and
        // writable for the lengths given.
        let ret = unsafe { libc::recvmsg(sock.as_raw_fd(), &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        match crate::errno::check(ret as libc::c_long) {
            Ok(n) => break usize::try_from(n).unwrap_or(0),
            Err(Errno(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
    };
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR reads its control
    // fields only.
    let header = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    let mut fds = Vec::new();
    if !header.is_null() {
        // SAFETY: a non-null CMSG_FIRSTHDR points at a complete cmsghdr
        // inside `control`.
        let h = unsafe { header.read() };
        // SAFETY: CMSG_LEN only computes a size.
        let empty = unsafe { libc::CMSG_LEN(0) } as usize;
        // SAFETY: CMSG_DATA of a header inside `control` points right after
        // it, still inside `control`.
        let data = unsafe { libc::CMSG_DATA(header) }.cast::<libc::c_int>();
        if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
            let count = h.cmsg_len.saturating_sub(empty) / size_of::<libc::c_int>();
            for i in 0..count {
                // SAFETY: the header says `count` ints of data follow it,
                // inside `control` (the kernel truncates what does not fit),
                // so the i-th is in bounds.
                let at = unsafe { data.add(i) };
                // SAFETY: `at` points at an int inside `control`, perhaps
                // unaligned, hence the unaligned read.
                let raw = unsafe { at.read_unaligned() };
                // SAFETY: SCM_RIGHTS installed this fd in this process just
                // now; nothing else owns it.
                fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
            }
        }
    }
    if fds.len() > 1 {
        return Err(Errno(libc::EBADMSG));
    }
    let fd = fds.pop();
    if msg.msg_flags & (libc::MSG_CTRUNC | libc::MSG_TRUNC) != 0 {
        return Err(Errno(libc::EMSGSIZE));
    }
    Ok((n, fd))
}
