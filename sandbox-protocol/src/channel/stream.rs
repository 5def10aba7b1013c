//! The connection under TLS, TCP or a Unix socket, and the sandbox's
//! listener for either: the rest of the channel does not tell them apart.

use std::io;
use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use super::endpoint::Endpoint;

/// A connection to the other end.
#[derive(Debug)]
pub enum Stream {
    /// Over TCP.
    Tcp(TcpStream),
    /// Over a Unix socket.
    Unix(UnixStream),
}

impl Stream {
    /// Connects to `to`.
    pub async fn connect(to: &Endpoint) -> io::Result<Self> {
        match to {
            Endpoint::Tcp(addr) => {
                let tcp = TcpStream::connect(addr).await?;
                // Small messages (pings, answers) go out at once.
                let _ = tcp.set_nodelay(true);
                Ok(Self::Tcp(tcp))
            }
            Endpoint::Unix(path) => UnixStream::connect(path).await.map(Self::Unix),
        }
    }
}

impl From<TcpStream> for Stream {
    fn from(tcp: TcpStream) -> Self {
        let _ = tcp.set_nodelay(true);
        Self::Tcp(tcp)
    }
}

impl From<UnixStream> for Stream {
    fn from(unix: UnixStream) -> Self {
        Self::Unix(unix)
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Tcp(s) => s.is_write_vectored(),
            Self::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            Self::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Self::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// Who connected, for the sandbox's log lines: a TCP peer's address, or
/// what the kernel says of a Unix peer (which has no address).
#[derive(Debug, Clone)]
pub struct Peer(String);

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The sandbox's listener.
#[derive(Debug)]
pub enum Listener {
    /// On a TCP address.
    Tcp(TcpListener),
    /// On a Unix socket, the path it was bound at.
    Unix(UnixListener, std::path::PathBuf),
}

impl Listener {
    /// Listens at `at`. A Unix socket is bound afresh: a socket file left
    /// at the path by an earlier sandbox that nothing listens on any more
    /// is removed first; anything else there (a live socket, a file, a
    /// directory) is left as it is and refuses the bind. The socket is
    /// then made `0600`, its owner this process's user.
    pub async fn bind(at: &Endpoint) -> io::Result<Self> {
        match at {
            Endpoint::Tcp(addr) => TcpListener::bind(addr).await.map(Self::Tcp),
            Endpoint::Unix(path) => {
                remove_stale(path).await?;
                let listener = UnixListener::bind(path)?;
                // Between the bind and this, the socket has the umask's
                // mode: a peer that connects then must still complete the
                // handshake with this generation's key, as on TCP.
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
                Ok(Self::Unix(listener, path.clone()))
            }
        }
    }

    /// Where it listens (a TCP port the kernel picked, resolved).
    pub fn local(&self) -> io::Result<Endpoint> {
        match self {
            Self::Tcp(l) => l.local_addr().map(Endpoint::Tcp),
            Self::Unix(_, path) => Ok(Endpoint::Unix(path.clone())),
        }
    }

    /// The next connection and who made it.
    pub async fn accept(&self) -> io::Result<(Stream, Peer)> {
        match self {
            Self::Tcp(l) => {
                let (tcp, addr) = l.accept().await?;
                Ok((Stream::from(tcp), Peer(addr.to_string())))
            }
            Self::Unix(l, _) => {
                let (unix, _) = l.accept().await?;
                // A peer outside this PID namespace (a supervisor on the
                // container's host) has pid 0 here: its uid alone says.
                let peer = match unix.peer_cred() {
                    Ok(cred) => match cred.pid().filter(|&pid| pid > 0) {
                        Some(pid) => format!("pid {pid} uid {}", cred.uid()),
                        None => format!("uid {}", cred.uid()),
                    },
                    Err(_) => "a peer".to_owned(),
                };
                Ok((Stream::Unix(unix), Peer(peer)))
            }
        }
    }
}

/// Removes the socket file at `path` if nothing listens on it: one an
/// earlier sandbox left behind. Anything else is an error that says what
/// is there.
async fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let there = |what: &str| {
        io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("`{}` is {what}: it is left as it is", path.display()),
        )
    };
    if !meta.file_type().is_socket() {
        return Err(there("not a socket"));
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(there("a socket something listens on")),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        Err(e) => Err(there(&format!("a socket that cannot be tried ({e})"))),
    }
}
