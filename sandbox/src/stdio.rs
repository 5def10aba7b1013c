//! The standard streams the sandbox is handed, which the workload
//! inherits.
//!
//! A standard stream that is a network socket could carry the workload
//! past the broker (an unconnected datagram socket sends anywhere), so
//! such a stream is refused unless it is a connected stream socket, whose
//! peer whoever started the sandbox chose.

use std::io;
use std::os::fd::AsFd;

/// Says which standard stream is an unconnected (or datagram) IP socket.
pub fn check_inherited() -> Result<(), String> {
    let streams = [
        ("stdin", io::stdin().as_fd().try_clone_to_owned()),
        ("stdout", io::stdout().as_fd().try_clone_to_owned()),
        ("stderr", io::stderr().as_fd().try_clone_to_owned()),
    ];
    for (name, fd) in streams {
        let Ok(fd) = fd else { continue };
        let sock = socket2::SockRef::from(&fd);
        let Ok(domain) = sock.domain() else { continue };
        if domain != socket2::Domain::IPV4 && domain != socket2::Domain::IPV6 {
            continue;
        }
        let connected_stream =
            sock.r#type().is_ok_and(|t| t == socket2::Type::STREAM) && sock.peer_addr().is_ok();
        if !connected_stream {
            return Err(format!(
                "{name} is a network socket that is not a connected stream; the workload could send through it past the broker"
            ));
        }
    }
    Ok(())
}
