//! The workload's network namespace: loopback only, and reachable by the
//! supervisor through `in_netns` without moving any of its own threads.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use common::{Exit, fork_child, pipe, read_u32, wait, write_u32};

fn netns_link(path: &str) -> std::path::PathBuf {
    std::fs::read_link(path).unwrap()
}

/// Names of the interfaces the caller's namespace has.
fn interface_names() -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    // SAFETY: if_nameindex returns null or an array ended by an entry with
    // index 0, each name NUL-terminated; it is read only before the one
    // if_freenameindex that releases it.
    unsafe {
        let list = libc::if_nameindex();
        let mut cur = list;
        while !cur.is_null() && (*cur).if_index != 0 {
            names.push(std::ffi::CStr::from_ptr((*cur).if_name).to_bytes().to_vec());
            cur = cur.add(1);
        }
        libc::if_freenameindex(list);
    }
    names
}

#[test]
fn root_can_create_namespaces_directly() {
    assert_eq!(enforcer::netns_support(), enforcer::NetnsSupport::Direct);
    assert!(enforcer::can_create_netns());
}

#[test]
fn child_sees_only_loopback_and_reaches_a_listener_made_by_the_parent() {
    let (ready_r, ready_w) = pipe();
    let (port_r, port_w) = pipe();
    let pid = fork_child(|| {
        if enforcer::unshare_net().is_err() {
            return 2;
        }
        if enforcer::loopback_is_up().ok() != Some(false) {
            return 3;
        }
        if enforcer::bring_up_loopback().is_err() || enforcer::loopback_is_up().ok() != Some(true) {
            return 4;
        }
        if interface_names() != [b"lo".to_vec()] {
            return 5;
        }
        write_u32(&ready_w, 1);
        let Some(port) = read_u32(&port_r) else {
            return 6;
        };
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port as u16)) else {
            return 7;
        };
        if std::io::Write::write_all(&mut stream, b"hi").is_err() {
            return 8;
        }
        0
    });
    drop(ready_w);
    assert_eq!(
        read_u32(&ready_r),
        Some(1),
        "child failed: {:?}",
        common::try_wait(pid)
    );

    let ns = enforcer::open_netns(pid as u32).unwrap();
    let own = netns_link("/proc/thread-self/ns/net");
    let child_ns = netns_link(&format!("/proc/{pid}/ns/net"));
    assert_ne!(own, child_ns);
    let (listener, seen) = enforcer::in_netns(ns.as_fd(), || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        (l, netns_link("/proc/thread-self/ns/net"))
    })
    .unwrap();
    assert_eq!(seen, child_ns, "the closure ran in the child's namespace");
    assert_eq!(
        netns_link("/proc/thread-self/ns/net"),
        own,
        "the caller did not move"
    );

    let port = listener.local_addr().unwrap().port();
    assert!(write_u32(&port_w, u32::from(port)));
    listener.set_nonblocking(true).unwrap();
    let stream = common::eventually(Duration::from_secs(5), || listener.accept().ok());
    let (mut stream, peer) = stream.expect("child never connected");
    assert!(peer.ip().is_loopback());
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0_u8; 2];
    stream.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hi");
    assert_eq!(wait(pid), Exit::Code(0));
    let _ = port_r.as_raw_fd();
}

#[test]
fn in_netns_reports_a_bad_namespace_fd() {
    let not_a_netns = std::fs::File::open("/proc/self/status").unwrap();
    let err = enforcer::in_netns(not_a_netns.as_fd(), || ()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
}
