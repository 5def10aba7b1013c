//! Another process's memory and mappings.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::errno::Errno;

/// `process_vm_readv` of `buf.len()` bytes at address `remote` of `pid`
/// into `buf`: the byte count read (short at the end of a mapping).
pub(crate) fn process_vm_read(
    pid: libc::pid_t,
    remote: usize,
    buf: &mut [u8],
) -> Result<usize, Errno> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: std::ptr::without_provenance_mut(remote),
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, live and writable for its length, the
    // only memory of ours written; the remote iovec is only interpreted in
    // the target's address space, where the kernel checks it.
    let n = unsafe { libc::process_vm_readv(pid, &raw const local, 1, &raw const remote, 1, 0) };
    usize::try_from(n).map_err(|_| Errno::last())
}

/// `struct procmap_query` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

// The kernel checks `size`; a layout slip would be refused there, but is
// better refused here.
const _: () = assert!(size_of::<ProcmapQuery>() == 104);

/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = (3 << 30) | (104 << 16) | (0x66 << 8) | 17;

/// One mapping found by [`procmap_query`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mapping {
    pub(crate) end: u64,
    /// Bytes of the name written into the caller's buffer, NUL included.
    pub(crate) name_len: usize,
}

/// `PROCMAP_QUERY` on an open `/proc/<pid>/maps`: the mapping at or after
/// `addr` matching `flags` (`PROCMAP_QUERY_*`), its name written into
/// `name`.
pub(crate) fn procmap_query(
    maps: BorrowedFd<'_>,
    flags: u64,
    addr: u64,
    name: &mut [u8],
) -> Result<Mapping, Errno> {
    let mut q = ProcmapQuery {
        size: size_of::<ProcmapQuery>() as u64,
        query_flags: flags,
        query_addr: addr,
        vma_name_size: u32::try_from(name.len()).unwrap_or(u32::MAX),
        vma_name_addr: name.as_mut_ptr() as u64,
        ..ProcmapQuery::default()
    };
    // SAFETY: `q` is a live, correctly sized `procmap_query`; the only
    // pointer in it is `name`, writable for `vma_name_size` bytes (at most
    // its length), the most the kernel writes there; `build_id_size` is 0,
    // so no build id is written.
    let rc = unsafe { libc::ioctl(maps.as_raw_fd(), PROCMAP_QUERY, &raw mut q) };
    if rc != 0 {
        return Err(Errno::last());
    }
    Ok(Mapping {
        end: q.vma_end,
        name_len: usize::try_from(q.vma_name_size).unwrap_or(0),
    })
}
