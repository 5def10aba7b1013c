//! Landlock's rights and the ABI that introduced each, as one typed table
//! (the `landlock` crate's `ABI` is the model). The compiler splits a
//! policy's rights by ABI from it, the enforcer maps the bundle's names to
//! kernel bits from it, and the supervisor decides what a running kernel
//! can enforce from it.

/// A Landlock ABI version, as `landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Abi(pub u8);

impl Abi {
    /// Filesystem rights only.
    pub(crate) const V1: Abi = Abi(1);
    /// TCP port rules (`LANDLOCK_ACCESS_NET_*`).
    pub const NET: Abi = Abi(4);
    /// IPC scoping: signals and abstract unix sockets.
    pub const SCOPE: Abi = Abi(6);
}

impl std::fmt::Display for Abi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One filesystem right (`LANDLOCK_ACCESS_FS_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FsRight {
    /// Run a file (ABI 1).
    Execute,
    /// Open a file for writing (ABI 1).
    WriteFile,
    /// Open a file for reading (ABI 1).
    ReadFile,
    /// List a directory (ABI 1).
    ReadDir,
    /// Remove an empty directory (ABI 1).
    RemoveDir,
    /// Unlink a file (ABI 1).
    RemoveFile,
    /// Create a character device (ABI 1).
    MakeChar,
    /// Create a directory (ABI 1).
    MakeDir,
    /// Create a regular file (ABI 1).
    MakeReg,
    /// Create a unix socket (ABI 1).
    MakeSock,
    /// Create a named pipe (ABI 1).
    MakeFifo,
    /// Create a block device (ABI 1).
    MakeBlock,
    /// Create a symbolic link (ABI 1).
    MakeSym,
    /// Link or rename a file into another directory (ABI 2); without it such moves fail with `EXDEV`.
    Refer,
    /// Truncate a file (ABI 3).
    Truncate,
    /// `ioctl` on a device file (ABI 5).
    IoctlDev,
}

impl FsRight {
    /// Every right, in the kernel's bit order (`bit()` is `1 << index`).
    pub const ALL: [FsRight; 16] = [
        FsRight::Execute,
        FsRight::WriteFile,
        FsRight::ReadFile,
        FsRight::ReadDir,
        FsRight::RemoveDir,
        FsRight::RemoveFile,
        FsRight::MakeChar,
        FsRight::MakeDir,
        FsRight::MakeReg,
        FsRight::MakeSock,
        FsRight::MakeFifo,
        FsRight::MakeBlock,
        FsRight::MakeSym,
        FsRight::Refer,
        FsRight::Truncate,
        FsRight::IoctlDev,
    ];

    /// The name the bundle uses: the kernel's constant without its
    /// `LANDLOCK_ACCESS_FS_` prefix, lowercase.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FsRight::Execute => "execute",
            FsRight::WriteFile => "write_file",
            FsRight::ReadFile => "read_file",
            FsRight::ReadDir => "read_dir",
            FsRight::RemoveDir => "remove_dir",
            FsRight::RemoveFile => "remove_file",
            FsRight::MakeChar => "make_char",
            FsRight::MakeDir => "make_dir",
            FsRight::MakeReg => "make_reg",
            FsRight::MakeSock => "make_sock",
            FsRight::MakeFifo => "make_fifo",
            FsRight::MakeBlock => "make_block",
            FsRight::MakeSym => "make_sym",
            FsRight::Refer => "refer",
            FsRight::Truncate => "truncate",
            FsRight::IoctlDev => "ioctl_dev",
        }
    }

    /// The right the bundle names `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<FsRight> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The kernel's bit for this right.
    #[must_use]
    pub const fn bit(self) -> u64 {
        1 << (self as u32)
    }

    /// The first ABI whose kernels know this right.
    #[must_use]
    pub fn since(self) -> Abi {
        match self {
            FsRight::Refer => Abi(2),
            FsRight::Truncate => Abi(3),
            FsRight::IoctlDev => Abi(5),
            _ => Abi::V1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_follow_the_kernel_order_and_names_round_trip() {
        for (i, right) in FsRight::ALL.into_iter().enumerate() {
            assert_eq!(right.bit(), 1 << i);
            assert_eq!(FsRight::from_name(right.name()), Some(right));
        }
        assert_eq!(FsRight::from_name("write"), None);
    }
}
