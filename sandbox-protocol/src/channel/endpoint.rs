//! Where the channel runs. Across hosts it is a TCP address; a workload
//! container with no network at all (Podman's `--network=none`) has no
//! address its supervisor could reach, only the directories it was given,
//! so the channel can also be a Unix socket in a directory both ends see.
//! TLS and the generation's checks are the same on either.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// What `unix:` is followed by.
const UNIX: &str = "unix:";

/// The longest path a Unix socket address holds (`sun_path` less its
/// NUL): a longer one would fail at `bind` with a bare `EINVAL`.
pub const MAX_UNIX_PATH: usize = 107;

/// A TCP address or a Unix socket's path; written `IP:PORT` or
/// `unix:/absolute/path`, in flags and in the bootstrap alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A Unix stream socket at an absolute path.
    Unix(PathBuf),
}

/// Why a string names no endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// `unix:` with a relative path: the two ends resolve it from
    /// different working directories, if not different hosts.
    #[error("`unix:` needs an absolute path, not `{0}`")]
    RelativeUnix(String),
    /// A path no Unix socket address can hold.
    #[error("a Unix socket's path holds at most {MAX_UNIX_PATH} bytes, `{path}` has {len}")]
    UnixTooLong {
        /// The path.
        path: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A NUL byte in the path.
    #[error("a Unix socket's path cannot hold a NUL byte")]
    Nul,
    /// Neither form.
    #[error("`{0}` is neither IP:PORT nor unix:/ABSOLUTE/PATH")]
    Neither(String),
}

impl Endpoint {
    /// The Unix socket's path, checked as [`FromStr`] checks it.
    pub fn unix(path: impl Into<PathBuf>) -> Result<Self, EndpointError> {
        let path = path.into();
        let text = path.to_string_lossy();
        if !path.is_absolute() {
            return Err(EndpointError::RelativeUnix(text.into_owned()));
        }
        let len = path.as_os_str().len();
        if len > MAX_UNIX_PATH {
            return Err(EndpointError::UnixTooLong {
                path: text.into_owned(),
                len,
            });
        }
        if path.as_os_str().as_encoded_bytes().contains(&0) {
            return Err(EndpointError::Nul);
        }
        Ok(Self::Unix(path))
    }

    /// The socket's path, for a Unix endpoint.
    #[must_use]
    pub fn unix_path(&self) -> Option<&Path> {
        match self {
            Self::Unix(p) => Some(p),
            Self::Tcp(_) => None,
        }
    }
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Self::Tcp(addr)
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(path) = s.strip_prefix(UNIX) {
            return Self::unix(path);
        }
        s.parse::<SocketAddr>()
            .map(Self::Tcp)
            .map_err(|_| EndpointError::Neither(s.to_owned()))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "{addr}"),
            Self::Unix(path) => write!(f, "{UNIX}{}", path.display()),
        }
    }
}

/// As its text: a bootstrap written before Unix sockets (`"listen":
/// "IP:PORT"`) reads unchanged.
impl serde::Serialize for Endpoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Self::Unix(path) = self
            && path.to_str().is_none()
        {
            return Err(serde::ser::Error::custom(
                "a Unix socket's path in a bootstrap must be UTF-8",
            ));
        }
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Endpoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
