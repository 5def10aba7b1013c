//! Values of the Linux x86-64 ABI that the seccomp tables compare
//! arguments against: namespace flags, socket families and types, ioctl
//! requests, mode and open flags.
//!
//! They travel in the bundle as numbers, not names: the bundle is the whole
//! filter, so its digest covers exactly what the kernel will compare and a
//! review of two bundles sees every value that changed, and the compiler
//! needs no kernel headers (it builds and runs anywhere, not only where the
//! supervisor runs). This is the compiler's one home for kernel numbers;
//! each that `libc` names is checked against it below.

pub(crate) const CLONE_NEWNS: u64 = 0x0002_0000;
pub(crate) const CLONE_NEWCGROUP: u64 = 0x0200_0000;
pub(crate) const CLONE_NEWUTS: u64 = 0x0400_0000;
pub(crate) const CLONE_NEWIPC: u64 = 0x0800_0000;
pub(crate) const CLONE_NEWUSER: u64 = 0x1000_0000;
pub(crate) const CLONE_NEWPID: u64 = 0x2000_0000;
pub(crate) const CLONE_NEWNET: u64 = 0x4000_0000;
/// Only meaningful to `unshare`: in `clone` these bits carry the exit signal.
pub(crate) const CLONE_NEWTIME: u64 = 0x0000_0080;
pub(crate) const NAMESPACE_FLAGS: [u64; 7] = [
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
];
pub(crate) const AF_NETLINK: u64 = 16;
pub(crate) const AF_PACKET: u64 = 17;
pub(crate) const NETLINK_ROUTE: u64 = 0;
pub(crate) const SOCK_TYPE_MASK: u64 = 0xf;
pub(crate) const SOCK_RAW: u64 = 3;
/// `SOCK_PACKET`, which the kernel quietly turns into a packet socket.
pub(crate) const SOCK_PACKET: u64 = 10;
pub(crate) const SECCOMP_SET_MODE_FILTER: u64 = 1;
pub(crate) const SECCOMP_FILTER_FLAG_NEW_LISTENER: u64 = 8;
pub(crate) const TIOCSTI: u64 = 0x5412;
pub(crate) const TIOCLINUX: u64 = 0x541c;
/// The shortest address that can name an IP destination (`sockaddr_in`).
pub(crate) const SOCKADDR_IN_LEN: u64 = 16;
pub(crate) const S_ISUID: u64 = 0o4000;
pub(crate) const S_ISGID: u64 = 0o2000;
pub(crate) const O_CREAT: u64 = 0o100;
/// `__O_TMPFILE`, the bit `O_TMPFILE` adds to `O_DIRECTORY`.
pub(crate) const O_TMPFILE_BIT: u64 = 0o20_000_000;
/// `FS_IOC_SETFLAGS` (and its 32-bit twin) and `FS_IOC_FSSETXATTR`: inode
/// flags (`chattr`), another piece of metadata Landlock does not mediate.
pub(crate) const FS_IOC_SETFLAGS: u64 = 0x4008_6602;
pub(crate) const FS_IOC32_SETFLAGS: u64 = 0x4004_6602;
pub(crate) const FS_IOC_FSSETXATTR: u64 = 0x401c_5820;
/// An inode's generation (and with it its ctime), owner-checked only:
/// `FS_IOC_SETVERSION`, ext4's older spelling `EXT4_IOC_SETVERSION`, and
/// their 32-bit twins.
pub(crate) const FS_IOC_SETVERSION: u64 = 0x4008_7602;
pub(crate) const FS_IOC32_SETVERSION: u64 = 0x4004_7602;
pub(crate) const EXT4_IOC_SETVERSION: u64 = 0x4008_6604;
pub(crate) const EXT4_IOC32_SETVERSION: u64 = 0x4004_6604;
/// A directory's encryption policy and a file's fs-verity: owner-checked
/// changes a file's readers see, neither needing a write Landlock checks.
pub(crate) const FS_IOC_SET_ENCRYPTION_POLICY: u64 = 0x800c_6613;
pub(crate) const FS_IOC_ENABLE_VERITY: u64 = 0x4080_6685;
/// `which` of `setpriority` and `ioprio_set` that names one process (or
/// thread); the others name a process group or every process of a user.
pub(crate) const PRIO_PROCESS: u64 = 0;
pub(crate) const IOPRIO_WHO_PROCESS: u64 = 1;
/// x86-64 numbers of the trapped calls (`kernel::TrappedCall`).
pub(crate) const SYS_CONNECT: i64 = 42;
pub(crate) const SYS_SENDTO: i64 = 44;
pub(crate) const SYS_SENDMSG: i64 = 46;
pub(crate) const SYS_LISTEN: i64 = 50;
pub(crate) const SYS_SENDMMSG: i64 = 307;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_numbers_are_the_kernels() {
        let pairs: [(&str, u64, u64); 28] = [
            ("CLONE_NEWNS", CLONE_NEWNS, libc::CLONE_NEWNS as u64),
            (
                "CLONE_NEWCGROUP",
                CLONE_NEWCGROUP,
                libc::CLONE_NEWCGROUP as u64,
            ),
            ("CLONE_NEWUTS", CLONE_NEWUTS, libc::CLONE_NEWUTS as u64),
            ("CLONE_NEWIPC", CLONE_NEWIPC, libc::CLONE_NEWIPC as u64),
            ("CLONE_NEWUSER", CLONE_NEWUSER, libc::CLONE_NEWUSER as u64),
            ("CLONE_NEWPID", CLONE_NEWPID, libc::CLONE_NEWPID as u64),
            ("CLONE_NEWNET", CLONE_NEWNET, libc::CLONE_NEWNET as u64),
            ("CLONE_NEWTIME", CLONE_NEWTIME, libc::CLONE_NEWTIME as u64),
            ("AF_NETLINK", AF_NETLINK, libc::AF_NETLINK as u64),
            ("AF_PACKET", AF_PACKET, libc::AF_PACKET as u64),
            ("NETLINK_ROUTE", NETLINK_ROUTE, libc::NETLINK_ROUTE as u64),
            ("SOCK_RAW", SOCK_RAW, libc::SOCK_RAW as u64),
            (
                "SECCOMP_SET_MODE_FILTER",
                SECCOMP_SET_MODE_FILTER,
                u64::from(libc::SECCOMP_SET_MODE_FILTER),
            ),
            (
                "SECCOMP_FILTER_FLAG_NEW_LISTENER",
                SECCOMP_FILTER_FLAG_NEW_LISTENER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            ),
            ("TIOCSTI", TIOCSTI, libc::TIOCSTI),
            ("TIOCLINUX", TIOCLINUX, libc::TIOCLINUX),
            (
                "SOCKADDR_IN_LEN",
                SOCKADDR_IN_LEN,
                std::mem::size_of::<libc::sockaddr_in>() as u64,
            ),
            ("S_ISUID", S_ISUID, u64::from(libc::S_ISUID)),
            ("S_ISGID", S_ISGID, u64::from(libc::S_ISGID)),
            ("O_CREAT", O_CREAT, libc::O_CREAT as u64),
            (
                "O_TMPFILE_BIT",
                O_TMPFILE_BIT,
                (libc::O_TMPFILE & !libc::O_DIRECTORY) as u64,
            ),
            ("FS_IOC_SETFLAGS", FS_IOC_SETFLAGS, libc::FS_IOC_SETFLAGS),
            (
                "FS_IOC32_SETFLAGS",
                FS_IOC32_SETFLAGS,
                libc::FS_IOC32_SETFLAGS,
            ),
            ("SOCK_TYPE_MASK", SOCK_TYPE_MASK, 0xf),
            (
                "FS_IOC_SETVERSION",
                FS_IOC_SETVERSION,
                libc::FS_IOC_SETVERSION,
            ),
            (
                "FS_IOC32_SETVERSION",
                FS_IOC32_SETVERSION,
                libc::FS_IOC32_SETVERSION,
            ),
            ("PRIO_PROCESS", PRIO_PROCESS, libc::PRIO_PROCESS as u64),
            ("IOPRIO_WHO_PROCESS", IOPRIO_WHO_PROCESS, 1),
        ];
        for (name, ours, kernel) in pairs {
            assert_eq!(ours, kernel, "{name}");
        }
        let calls = [
            ("SYS_connect", SYS_CONNECT, libc::SYS_connect),
            ("SYS_sendto", SYS_SENDTO, libc::SYS_sendto),
            ("SYS_sendmsg", SYS_SENDMSG, libc::SYS_sendmsg),
            ("SYS_listen", SYS_LISTEN, libc::SYS_listen),
            ("SYS_sendmmsg", SYS_SENDMMSG, libc::SYS_sendmmsg),
        ];
        for (name, ours, kernel) in calls {
            assert_eq!(ours, kernel, "{name}");
        }
    }
}
