//! A WebSocket echo server over TLS for the proxy benchmark: the opening
//! handshake answered, every client message sent back as one text frame.
//! Minimal on purpose (no extensions, no fragmentation): the benchmark's
//! client sends single-frame messages only.

use std::net::TcpListener;
use std::sync::Arc;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Serves `listener` on a thread of its own with a certificate for
/// `names` from a new CA; returns the CA's PEM.
pub fn serve(listener: TcpListener, names: &[&str]) -> String {
    let (ca_pem, config) = super::upstream::tls_server(names);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                tcp.set_nodelay(true).unwrap();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let _ = echo(tls).await;
                    }
                });
            }
        });
    });
    ca_pem
}

/// The `Sec-WebSocket-Accept` for `key`.
pub fn accept_for(key: &str) -> String {
    let input = format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, input.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// Reads an HTTP head (up to the blank line).
pub async fn read_head<S: AsyncRead + Unpin>(io: &mut S) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0_u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if io.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// One frame: (opcode, payload unmasked).
pub async fn read_frame<S: AsyncRead + Unpin>(io: &mut S) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0_u8; 2];
    io.read_exact(&mut h).await?;
    let mut len = u64::from(h[1] & 0x7f);
    if len == 126 {
        let mut b = [0_u8; 2];
        io.read_exact(&mut b).await?;
        len = u64::from(u16::from_be_bytes(b));
    } else if len == 127 {
        let mut b = [0_u8; 8];
        io.read_exact(&mut b).await?;
        len = u64::from_be_bytes(b);
    }
    let mut mask = [0_u8; 4];
    if h[1] & 0x80 != 0 {
        io.read_exact(&mut mask).await?;
    }
    let mut payload = vec![0_u8; len as usize];
    io.read_exact(&mut payload).await?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    Ok((h[0] & 0x0f, payload))
}

/// One FIN frame, masked with `mask` when given.
pub fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    let bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(bit | n as u8),
        n if n < 65_536 => {
            out.push(bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(m) => {
            out.extend_from_slice(&m);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut io: S) -> std::io::Result<()> {
    let head = read_head(&mut io).await?;
    let key = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("sec-websocket-key")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    let resp = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_for(&key)
    );
    io.write_all(resp.as_bytes()).await?;
    loop {
        let (op, payload) = read_frame(&mut io).await?;
        match op {
            0x8 => {
                io.write_all(&frame(0x8, &payload, None)).await?;
                return io.shutdown().await;
            }
            0x9 => io.write_all(&frame(0xA, &payload, None)).await?,
            0x1 | 0x2 => io.write_all(&frame(op, &payload, None)).await?,
            _ => {}
        }
    }
}
