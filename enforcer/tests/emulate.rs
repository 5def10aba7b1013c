//! Performing a call on a socket the supervisor holds: `connect_on`, the
//! namespace of a socket, and a thread with the workload's credentials.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;

use common::TempDir;
use enforcer::{Credentials, SockAddr, UnixAddr};

fn unix_socket() -> OwnedFd {
    socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)
        .unwrap()
        .into()
}

#[test]
fn connect_on_connects_the_given_socket() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sock: OwnedFd = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .unwrap()
        .into();
    let std::net::SocketAddr::V4(at) = listener.local_addr().unwrap() else {
        panic!()
    };
    enforcer::connect_on(sock.as_fd(), &SockAddr::Inet(at)).unwrap();
    let stream = TcpStream::from(sock);
    assert_eq!(stream.peer_addr().unwrap(), listener.local_addr().unwrap());
}

#[test]
fn a_socket_knows_its_network_namespace() {
    let here = std::fs::File::open("/proc/self/ns/net").unwrap();
    let sock = unix_socket();
    let ns = enforcer::socket_netns(sock.as_fd()).unwrap();
    assert!(enforcer::same_namespace(ns.as_fd(), here.as_fd()).unwrap());
    let other = std::thread::spawn(|| {
        enforcer::unshare_net().unwrap();
        let s: OwnedFd = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
            .unwrap()
            .into();
        s
    })
    .join()
    .unwrap();
    let ns = enforcer::socket_netns(other.as_fd()).unwrap();
    assert!(!enforcer::same_namespace(ns.as_fd(), here.as_fd()).unwrap());
}

#[test]
fn a_unix_connect_runs_with_the_credentials_it_is_given() {
    let dir = TempDir::new("emulate");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("root-only.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let addr = SockAddr::Unix(UnixAddr::Pathname(
        path.as_os_str().as_encoded_bytes().to_vec(),
    ));
    let nobody = enforcer::resolve_user("nobody").unwrap();
    let groups = [nobody.gid];
    let as_nobody = Credentials {
        uid: nobody.uid,
        gid: nobody.gid,
        groups: &groups,
    };
    let sock = unix_socket();
    let result = enforcer::with_credentials(Some(as_nobody), || {
        enforcer::connect_on(sock.as_fd(), &addr)
    })
    .unwrap();
    assert_eq!(result.unwrap_err().raw(), libc::EACCES);
    // Root without capabilities still owns the socket: allowed.
    let sock = unix_socket();
    let result =
        enforcer::with_credentials(None, || enforcer::connect_on(sock.as_fd(), &addr)).unwrap();
    assert!(result.is_ok());
    // The caller's own thread kept its identity.
    assert_eq!(enforcer::effective_caps(std::process::id()).unwrap() & 1, 1);
}
