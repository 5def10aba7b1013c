//! Copying socket addresses out of a trapped workload and parsing them the
//! way the kernel would.
//!
//! The caller must check [`crate::id_valid`] after every read here; see
//! [`crate::notify`] for why. Lengths are checked as the kernel checks them,
//! and [`SockAddrError::errno`] gives the errno the kernel would have
//! answered, so a malformed address fails exactly as it would unsandboxed.

#![forbid(unsafe_code)]

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
use std::os::unix::fs::FileExt;

/// `sizeof(struct sockaddr_storage)`: the kernel refuses longer addresses.
pub(crate) const SOCKADDR_MAX: usize = 128;
const SOCKADDR_IN_LEN: usize = 16;
/// RFC 2133's `sockaddr_in6` without `sin6_scope_id`, still accepted.
const SOCKADDR_IN6_MIN: usize = 24;
const SOCKADDR_IN6_LEN: usize = 28;
pub(crate) const MSGHDR_LEN: usize = 56;
pub(crate) const MMSGHDR_LEN: usize = 64;
/// The kernel clamps `sendmmsg`'s `vlen` to `UIO_MAXIOV`.
pub(crate) const UIO_MAXIOV: u64 = 1024;

/// A parsed socket address. IPv4-mapped IPv6 addresses stay IPv6 here; the
/// caller canonicalises before matching policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SockAddr {
    /// `AF_UNSPEC`: on `connect`, dissolves the association. The kernel's
    /// IPv4 UDP (and L2TP) send path does not look at the family beyond
    /// "AF_INET or AF_UNSPEC" and sends to the `sockaddr_in` fields anyway,
    /// so the same bytes read as one are kept (`None` when shorter than a
    /// `sockaddr_in`); see [`SockAddr::sent_on`].
    Unspec {
        /// The bytes read as a `sockaddr_in`, family aside.
        inet: Option<SocketAddrV4>,
    },
    /// `AF_INET`.
    Inet(SocketAddrV4),
    /// `AF_INET6`, flow info and scope id kept.
    Inet6(SocketAddrV6),
    /// `AF_UNIX`.
    Unix(UnixAddr),
    /// A family this crate does not parse, with the raw bytes after the
    /// family field.
    Other {
        /// `sa_family` as given.
        family: u16,
        /// Everything after the family field, up to the given length.
        bytes: Vec<u8>,
    },
}

/// The three kinds of `sockaddr_un`, told apart the way the kernel does:
/// by the length and the first byte of `sun_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixAddr {
    /// Only the family was given.
    Unnamed,
    /// A filesystem path, up to its first NUL.
    Pathname(Vec<u8>),
    /// The abstract namespace name (after the leading NUL, exact length).
    Abstract(Vec<u8>),
}

/// Why an address or message could not be read from the workload; the
/// trapped call is then answered with [`SockAddrError::errno`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SockAddrError {
    /// The length argument, as the workload passed it.
    #[error("address length {0} is out of range")]
    BadLength(u64),
    /// Shorter than the family's address structure.
    #[error("address of family {family} needs {need} bytes, got {got}")]
    Truncated {
        /// `sa_family` as given.
        family: u16,
        /// The structure's size, in bytes.
        need: usize,
        /// The length passed, in bytes.
        got: usize,
    },
    /// The pointer does not lead to readable memory of the workload (or the
    /// thread is gone).
    #[error("cannot read the workload's memory")]
    Memory(#[source] io::Error),
}

impl SockAddrError {
    /// The errno the kernel would have returned for the same call.
    #[must_use]
    pub fn errno(&self) -> i32 {
        match self {
            Self::BadLength(_) | Self::Truncated { .. } => libc::EINVAL,
            Self::Memory(_) => libc::EFAULT,
        }
    }
}

/// Copies `buf.len()` bytes at `addr` in process (or thread) `pid`.
///
/// Uses `process_vm_readv`; falls back to `/proc/<pid>/mem` when that call
/// is unavailable or refused (a seccomp policy on the supervisor itself, or
/// an old kernel). A short read is `EFAULT`, as the kernel would say.
pub(crate) fn read_memory(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let fault = || io::Error::from_raw_os_error(libc::EFAULT);
    let remote_base = usize::try_from(addr).map_err(|_| fault())?;
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    match crate::sys::mem::process_vm_read(pid, remote_base, buf) {
        Ok(n) if n == buf.len() => return Ok(()),
        Ok(_) => return Err(fault()),
        Err(crate::Errno(libc::ENOSYS | libc::EPERM)) => {}
        Err(e) => return Err(e.into()),
    }
    let mem = File::open(format!("/proc/{pid}/mem"))?;
    mem.read_exact_at(buf, addr).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            fault()
        } else {
            e
        }
    })
}

/// Reads and parses the `len`-byte address at `addr` in `pid`, as passed to
/// `connect(fd, addr, len)` or `sendto(.., addr, len)`. `len` is the raw
/// register: like the kernel, only its low 32 bits count, as a signed int.
pub fn read_sockaddr(pid: u32, addr: u64, len: u64) -> Result<SockAddr, SockAddrError> {
    let n = usize::try_from(kernel_int(len))
        .ok()
        .filter(|n| *n <= SOCKADDR_MAX)
        .ok_or(SockAddrError::BadLength(len))?;
    read_sockaddr_exact(pid, addr, n)
}

pub(crate) fn read_sockaddr_exact(
    pid: u32,
    addr: u64,
    n: usize,
) -> Result<SockAddr, SockAddrError> {
    let mut buf = [0_u8; SOCKADDR_MAX];
    let bytes = buf.get_mut(..n).ok_or(SockAddrError::BadLength(n as u64))?;
    read_memory(pid, addr, bytes).map_err(SockAddrError::Memory)?;
    parse_sockaddr(bytes)
}

/// The value an `int` syscall argument has inside the kernel.
pub(crate) fn kernel_int(reg: u64) -> i32 {
    let low = u32::try_from(reg & 0xffff_ffff).unwrap_or_default();
    i32::from_ne_bytes(low.to_ne_bytes())
}

/// Reads `msg_name` of the `struct msghdr` at `msghdr` in `pid` (the
/// destination of a `sendmsg`); `None` when it has none. As in the kernel,
/// a name with length 0 counts as none and a length over 128 is clamped.
pub fn read_msghdr_name(pid: u32, msghdr: u64) -> Result<Option<SockAddr>, SockAddrError> {
    let mut hdr = [0_u8; MSGHDR_LEN];
    read_memory(pid, msghdr, &mut hdr).map_err(SockAddrError::Memory)?;
    // struct msghdr on LP64: void *msg_name; socklen_t msg_namelen; ...
    let name = u64_at(&hdr, 0);
    let namelen = u32_at(&hdr, 8);
    let Ok(n) = usize::try_from(kernel_int(u64::from(namelen))) else {
        return Err(SockAddrError::BadLength(u64::from(namelen)));
    };
    if name == 0 || n == 0 {
        return Ok(None);
    }
    read_sockaddr_exact(pid, name, n.min(SOCKADDR_MAX)).map(Some)
}

/// The destination of each message of a `sendmmsg(fd, msgvec, vlen, ..)`.
/// The kernel sends at most `UIO_MAXIOV` messages; so many are read here.
pub fn read_mmsghdr_names(
    pid: u32,
    msgvec: u64,
    vlen: u64,
) -> Result<Vec<Option<SockAddr>>, SockAddrError> {
    let count = vlen.min(UIO_MAXIOV);
    (0..count)
        .map(|i| {
            let stride = MMSGHDR_LEN as u64;
            let at = msgvec
                .checked_add(i * stride)
                .ok_or_else(|| SockAddrError::Memory(io::Error::from_raw_os_error(libc::EFAULT)))?;
            read_msghdr_name(pid, at)
        })
        .collect()
}

pub(crate) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0_u8; 8];
    if let Some(src) = bytes.get(at..at + 8) {
        word.copy_from_slice(src);
    }
    u64::from_ne_bytes(word)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0_u8; 4];
    if let Some(src) = bytes.get(at..at + 4) {
        word.copy_from_slice(src);
    }
    u32::from_ne_bytes(word)
}

fn u16_be_at(bytes: &[u8], at: usize) -> u16 {
    let mut word = [0_u8; 2];
    if let Some(src) = bytes.get(at..at + 2) {
        word.copy_from_slice(src);
    }
    u16::from_be_bytes(word)
}

impl SockAddr {
    /// The address in the kernel's layout, as `connect(2)` takes it: the
    /// inverse of [`parse_sockaddr`] (a unix pathname gains its NUL).
    #[must_use]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let family = |f: i32| u16::try_from(f).unwrap_or_default().to_ne_bytes();
        let mut out = Vec::with_capacity(SOCKADDR_IN6_LEN);
        match self {
            Self::Unspec { inet } => {
                out.extend_from_slice(&family(libc::AF_UNSPEC));
                if let Some(a) = inet {
                    out.extend_from_slice(&a.port().to_be_bytes());
                    out.extend_from_slice(&a.ip().octets());
                }
                out.resize(SOCKADDR_IN_LEN, 0);
            }
            Self::Inet(a) => {
                out.extend_from_slice(&family(libc::AF_INET));
                out.extend_from_slice(&a.port().to_be_bytes());
                out.extend_from_slice(&a.ip().octets());
                out.resize(SOCKADDR_IN_LEN, 0);
            }
            Self::Inet6(a) => {
                out.extend_from_slice(&family(libc::AF_INET6));
                out.extend_from_slice(&a.port().to_be_bytes());
                out.extend_from_slice(&a.flowinfo().to_be_bytes());
                out.extend_from_slice(&a.ip().octets());
                out.extend_from_slice(&a.scope_id().to_ne_bytes());
            }
            Self::Unix(u) => {
                out.extend_from_slice(&family(libc::AF_UNIX));
                match u {
                    UnixAddr::Unnamed => {}
                    UnixAddr::Pathname(p) => {
                        out.extend_from_slice(p);
                        out.push(0);
                    }
                    UnixAddr::Abstract(name) => {
                        out.push(0);
                        out.extend_from_slice(name);
                    }
                }
            }
            Self::Other { family: f, bytes } => {
                out.extend_from_slice(&f.to_ne_bytes());
                out.extend_from_slice(bytes);
            }
        }
        out
    }
}

impl SockAddr {
    /// Where the kernel sends data that names this address on a socket of
    /// family `domain` and type `sock_type` (`SO_DOMAIN`, `SO_TYPE`), which
    /// is not always what the family field says:
    ///
    /// - IPv4 (UDP, L2TP): `AF_UNSPEC` is read as `AF_INET`
    ///   (`udp_sendmsg` checks only "AF_INET or AF_UNSPEC");
    /// - IPv6 (UDP): an `AF_INET` address is sent over IPv4, `AF_UNSPEC`
    ///   means no address (`udpv6_sendmsg`);
    /// - stream sockets ignore the address (`MSG_FASTOPEN` aside, which the
    ///   caller refuses before);
    /// - unix sockets take only unix addresses.
    ///
    /// `Ok(None)`: the socket's peer is used. `Err(errno)`: the kernel
    /// refuses the call with that errno (or an address family a decision
    /// cannot be made on), so the caller answers it without running it.
    /// Other domains (netlink) get the address back unchanged.
    pub fn sent_on(&self, domain: i32, sock_type: i32) -> Result<Option<Self>, i32> {
        let inet = matches!(domain, libc::AF_INET | libc::AF_INET6);
        if inet && sock_type == libc::SOCK_STREAM {
            return Ok(None);
        }
        match (domain, self) {
            (libc::AF_INET, Self::Inet(_)) | (libc::AF_INET6, Self::Inet(_) | Self::Inet6(_)) => {
                Ok(Some(self.clone()))
            }
            (libc::AF_INET, Self::Unspec { inet: Some(a) }) => Ok(Some(Self::Inet(*a))),
            (libc::AF_INET, Self::Unspec { inet: None }) => Err(libc::EINVAL),
            (libc::AF_INET6, Self::Unspec { .. }) => Ok(None),
            (libc::AF_INET | libc::AF_INET6, _) => Err(libc::EAFNOSUPPORT),
            (libc::AF_UNIX, Self::Unix(_)) => Ok(Some(self.clone())),
            (libc::AF_UNIX, _) => Err(libc::EINVAL),
            _ => Ok(Some(self.clone())),
        }
    }
}

/// The `sockaddr_in` fields of `bytes` (at least 16 bytes long).
fn inet_fields(bytes: &[u8]) -> SocketAddrV4 {
    let mut ip = [0_u8; 4];
    ip.copy_from_slice(bytes.get(4..8).unwrap_or(&[0; 4]));
    SocketAddrV4::new(Ipv4Addr::from(ip), u16_be_at(bytes, 2))
}

/// Parses address bytes as the kernel's protocol handlers would check them.
pub(crate) fn parse_sockaddr(bytes: &[u8]) -> Result<SockAddr, SockAddrError> {
    let Some((family, rest)) = bytes.split_first_chunk::<2>() else {
        return Err(SockAddrError::Truncated {
            family: 0,
            need: 2,
            got: bytes.len(),
        });
    };
    let family = u16::from_ne_bytes(*family);
    let need = |need: usize| {
        if bytes.len() < need {
            Err(SockAddrError::Truncated {
                family,
                need,
                got: bytes.len(),
            })
        } else {
            Ok(())
        }
    };
    match i32::from(family) {
        libc::AF_UNSPEC => Ok(SockAddr::Unspec {
            inet: (bytes.len() >= SOCKADDR_IN_LEN).then(|| inet_fields(bytes)),
        }),
        libc::AF_INET => {
            need(SOCKADDR_IN_LEN)?;
            Ok(SockAddr::Inet(inet_fields(bytes)))
        }
        libc::AF_INET6 => {
            need(SOCKADDR_IN6_MIN)?;
            let mut ip = [0_u8; 16];
            ip.copy_from_slice(bytes.get(8..24).unwrap_or(&[0; 16]));
            let flowinfo = u32::from_be(u32_at(bytes, 4));
            let scope_id = if bytes.len() >= SOCKADDR_IN6_LEN {
                u32_at(bytes, 24)
            } else {
                0
            };
            Ok(SockAddr::Inet6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                u16_be_at(bytes, 2),
                flowinfo,
                scope_id,
            )))
        }
        libc::AF_UNIX => Ok(SockAddr::Unix(match rest.split_first() {
            None => UnixAddr::Unnamed,
            Some((0, name)) => UnixAddr::Abstract(name.to_vec()),
            Some(_) => {
                let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                UnixAddr::Pathname(rest.get(..end).unwrap_or(rest).to_vec())
            }
        })),
        _ => Ok(SockAddr::Other {
            family,
            bytes: rest.to_vec(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inet(port: u16, ip: [u8; 4]) -> Vec<u8> {
        let mut b = vec![0; 16];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port.to_be_bytes());
        b[4..8].copy_from_slice(&ip);
        b
    }

    #[test]
    fn parses_inet_and_rejects_short() {
        let b = inet(443, [10, 0, 0, 1]);
        assert_eq!(
            parse_sockaddr(&b).unwrap(),
            SockAddr::Inet("10.0.0.1:443".parse().unwrap())
        );
        let err = parse_sockaddr(&b[..15]).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
    }

    #[test]
    fn parses_inet6_mapped_and_short_form() {
        let mut b = vec![0; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&53_u16.to_be_bytes());
        b[8..24].copy_from_slice(&"::ffff:1.2.3.4".parse::<Ipv6Addr>().unwrap().octets());
        b[24..28].copy_from_slice(&7_u32.to_ne_bytes());
        let SockAddr::Inet6(a) = parse_sockaddr(&b).unwrap() else {
            panic!()
        };
        assert_eq!(a.ip().to_ipv4_mapped(), Some(Ipv4Addr::new(1, 2, 3, 4)));
        assert_eq!((a.port(), a.scope_id()), (53, 7));
        let SockAddr::Inet6(short) = parse_sockaddr(&b[..24]).unwrap() else {
            panic!()
        };
        assert_eq!(short.scope_id(), 0);
        assert!(parse_sockaddr(&b[..23]).is_err());
    }

    #[test]
    fn parses_unix_forms() {
        let fam = (libc::AF_UNIX as u16).to_ne_bytes();
        let mut path = fam.to_vec();
        path.extend_from_slice(b"/run/x.sock\0junk");
        assert_eq!(
            parse_sockaddr(&path).unwrap(),
            SockAddr::Unix(UnixAddr::Pathname(b"/run/x.sock".to_vec()))
        );
        let mut abs = fam.to_vec();
        abs.extend_from_slice(b"\0name\0x");
        assert_eq!(
            parse_sockaddr(&abs).unwrap(),
            SockAddr::Unix(UnixAddr::Abstract(b"name\0x".to_vec()))
        );
        assert_eq!(
            parse_sockaddr(&fam).unwrap(),
            SockAddr::Unix(UnixAddr::Unnamed)
        );
        assert_eq!(
            parse_sockaddr(&[0, 0]).unwrap(),
            SockAddr::Unspec { inet: None }
        );
        assert!(parse_sockaddr(&[1]).is_err());
    }

    #[test]
    fn encode_is_the_inverse_of_parse() {
        let v6 = SocketAddrV6::new("fe80::1".parse().unwrap(), 443, 7, 3);
        for addr in [
            SockAddr::Unspec {
                inet: Some("10.1.2.3:53".parse().unwrap()),
            },
            SockAddr::Inet("10.1.2.3:8080".parse().unwrap()),
            SockAddr::Inet6(v6),
            SockAddr::Unix(UnixAddr::Pathname(b"/run/x.sock".to_vec())),
            SockAddr::Unix(UnixAddr::Abstract(b"name\0x".to_vec())),
            SockAddr::Unix(UnixAddr::Unnamed),
        ] {
            assert_eq!(parse_sockaddr(&addr.encode()).unwrap(), addr);
        }
    }

    #[test]
    fn an_unspec_address_is_read_as_the_sockets_family_would() {
        let mut b = inet(4242, [192, 0, 2, 7]);
        b[..2].copy_from_slice(&(libc::AF_UNSPEC as u16).to_ne_bytes());
        let addr = parse_sockaddr(&b).unwrap();
        let v4 = SockAddr::Inet("192.0.2.7:4242".parse().unwrap());
        let (udp, tcp) = (libc::SOCK_DGRAM, libc::SOCK_STREAM);
        assert_eq!(addr.sent_on(libc::AF_INET, udp), Ok(Some(v4.clone())));
        assert_eq!(addr.sent_on(libc::AF_INET6, udp), Ok(None));
        assert_eq!(addr.sent_on(libc::AF_INET, tcp), Ok(None));
        assert_eq!(addr.sent_on(libc::AF_UNIX, udp), Err(libc::EINVAL));
        let short = parse_sockaddr(&b[..8]).unwrap();
        assert_eq!(short.sent_on(libc::AF_INET, udp), Err(libc::EINVAL));
        // An IPv6 UDP socket sends an AF_INET address over IPv4.
        assert_eq!(v4.sent_on(libc::AF_INET6, udp), Ok(Some(v4.clone())));
        let v6 = SockAddr::Inet6("[::1]:53".parse().unwrap());
        assert_eq!(v6.sent_on(libc::AF_INET, udp), Err(libc::EAFNOSUPPORT));
    }

    #[test]
    fn reads_own_memory_and_refuses_long_lengths() {
        let b = inet(80, [127, 0, 0, 1]);
        let pid = std::process::id();
        let got = read_sockaddr(pid, b.as_ptr() as u64, 16).unwrap();
        assert_eq!(got, SockAddr::Inet("127.0.0.1:80".parse().unwrap()));
        assert!(matches!(
            read_sockaddr(pid, b.as_ptr() as u64, 129),
            Err(SockAddrError::BadLength(129))
        ));
        let err = read_sockaddr(pid, 8, 16).unwrap_err();
        assert_eq!(err.errno(), libc::EFAULT);
        // Only the low 32 bits of the length register count, as an int.
        let got = read_sockaddr(pid, b.as_ptr() as u64, 16 | 1 << 32).unwrap();
        assert_eq!(got, SockAddr::Inet("127.0.0.1:80".parse().unwrap()));
        assert!(read_sockaddr(pid, b.as_ptr() as u64, 0xffff_ffff).is_err());
    }

    #[test]
    fn msghdr_names_follow_the_kernels_length_rules() {
        let mut name = inet(53, [127, 0, 0, 1]);
        name.resize(200, 0);
        let read = |namelen: u32| {
            let hdr = libc::msghdr {
                msg_name: name.as_ptr().cast_mut().cast(),
                msg_namelen: namelen,
                msg_iov: std::ptr::null_mut(),
                msg_iovlen: 0,
                msg_control: std::ptr::null_mut(),
                msg_controllen: 0,
                msg_flags: 0,
            };
            read_msghdr_name(std::process::id(), std::ptr::from_ref(&hdr) as u64)
        };
        let want = Some(SockAddr::Inet("127.0.0.1:53".parse().unwrap()));
        assert_eq!(read(200).unwrap(), want, "clamped to 128");
        assert_eq!(read(0).unwrap(), None);
        assert!(read(u32::MAX).is_err());
    }
}
