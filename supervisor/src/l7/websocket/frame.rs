//! RFC 6455 frames: the header of a client frame, checked as the server
//! would have to, and the frames the proxy writes itself.
//!
//! Client frames are checked strictly (mask present, reserved bits clear,
//! known opcode, control frames short and whole, minimal lengths): the
//! proxy judges the message the frames carry, so a frame it could read in
//! another way than the server is closed on, never guessed at. Server
//! frames are only measured, to find where one ends, unless the upgrade
//! carried a secret: then they are read whole and checked the same way,
//! unmasked.

use bytes::BytesMut;

pub(super) const OP_CONTINUATION: u8 = 0x0;
pub(super) const OP_TEXT: u8 = 0x1;
pub(super) const OP_BINARY: u8 = 0x2;
pub(super) const OP_CLOSE: u8 = 0x8;
pub(super) const OP_PING: u8 = 0x9;
pub(super) const OP_PONG: u8 = 0xA;

/// The longest payload a control frame may carry.
const MAX_CONTROL_PAYLOAD: u64 = 125;

/// Close codes the proxy sends.
pub(super) mod close {
    /// A protocol error: a frame the proxy will not read.
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A text message that is not UTF-8, or a close reason that is not.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// A message the policy denies.
    pub const POLICY_VIOLATION: u16 = 1008;
    /// A message over the endpoint's limit.
    pub const MESSAGE_TOO_BIG: u16 = 1009;
    /// A reloaded policy no longer allows the connection.
    pub const SERVICE_RESTART: u16 = 1012;
}

/// Why a client frame ends the connection: the close code and a short
/// reason, both sent to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::l7) struct Violation {
    pub code: u16,
    pub reason: String,
}

impl Violation {
    pub fn protocol(reason: impl Into<String>) -> Self {
        Self {
            code: close::PROTOCOL_ERROR,
            reason: reason.into(),
        }
    }

    pub fn invalid_payload(reason: impl Into<String>) -> Self {
        Self {
            code: close::INVALID_PAYLOAD,
            reason: reason.into(),
        }
    }

    pub fn too_big(reason: impl Into<String>) -> Self {
        Self {
            code: close::MESSAGE_TOO_BIG,
            reason: reason.into(),
        }
    }
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub fin: bool,
    pub opcode: u8,
    /// The masking key; `None` on an unmasked frame.
    pub mask: Option<[u8; 4]>,
    pub payload_len: u64,
    /// How many bytes the header took.
    pub header_len: usize,
}

impl Header {
    pub fn is_control(&self) -> bool {
        self.opcode & 0x8 != 0
    }
}

/// Reads a header from the start of `buf` without judging it. `None`
/// when `buf` does not hold a whole header yet.
fn read_header(buf: &[u8]) -> Option<(Header, u8, bool)> {
    let (&b0, rest) = buf.split_first()?;
    let (&b1, rest) = rest.split_first()?;
    let masked = b1 & 0x80 != 0;
    let (payload_len, ext, minimal) = match b1 & 0x7f {
        126 => {
            let bytes: [u8; 2] = rest.get(..2)?.try_into().ok()?;
            let n = u64::from(u16::from_be_bytes(bytes));
            (n, 2, n >= 126)
        }
        127 => {
            let bytes: [u8; 8] = rest.get(..8)?.try_into().ok()?;
            let n = u64::from_be_bytes(bytes);
            (n, 8, n > u64::from(u16::MAX))
        }
        n => (u64::from(n), 0, true),
    };
    let mask = if masked {
        let key: [u8; 4] = rest.get(ext..ext + 4)?.try_into().ok()?;
        Some(key)
    } else {
        None
    };
    let header = Header {
        fin: b0 & 0x80 != 0,
        opcode: b0 & 0x0f,
        mask,
        payload_len,
        header_len: 2 + ext + if masked { 4 } else { 0 },
    };
    Some((header, b0 & 0x70, minimal))
}

/// The header of a client frame at the start of `buf`, checked; `Ok(None)`
/// when `buf` does not hold a whole header yet.
pub(super) fn client_header(buf: &[u8]) -> Result<Option<Header>, Violation> {
    checked_header(buf, true)
}

/// The header of a server frame at the start of `buf`, checked as a
/// client's is, except that it must not be masked (RFC 6455 §5.1).
pub(super) fn server_header(buf: &[u8]) -> Result<Option<Header>, Violation> {
    checked_header(buf, false)
}

fn checked_header(buf: &[u8], masked: bool) -> Result<Option<Header>, Violation> {
    let Some((h, rsv, minimal)) = read_header(buf) else {
        return Ok(None);
    };
    if rsv != 0 {
        return Err(Violation::protocol(
            "reserved bits set: no extension was negotiated",
        ));
    }
    if h.mask.is_some() != masked {
        return Err(Violation::protocol(if masked {
            "client frames must be masked"
        } else {
            "server frames must not be masked"
        }));
    }
    if !matches!(
        h.opcode,
        OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG
    ) {
        return Err(Violation::protocol("reserved opcode"));
    }
    if h.payload_len >> 63 != 0 {
        return Err(Violation::protocol("payload length has its top bit set"));
    }
    if !minimal {
        return Err(Violation::protocol(
            "payload length not in its shortest form",
        ));
    }
    if h.is_control() && (!h.fin || h.payload_len > MAX_CONTROL_PAYLOAD) {
        return Err(Violation::protocol(
            "control frames must be unfragmented and at most 125 bytes",
        ));
    }
    Ok(Some(h))
}

/// How long the server frame starting `buf` is: header length and payload
/// length. `None` when the header is not whole yet.
pub(super) fn server_frame_len(buf: &[u8]) -> Option<(usize, u64)> {
    read_header(buf).map(|(h, _, _)| (h.header_len, h.payload_len))
}

/// The next whole frame at the start of `buf`, its header checked by
/// `header` ([`client_header`] or [`server_header`]), taken out of `buf`
/// and unmasked; `Ok(None)` until all of it is there. A data frame that
/// would bring the message being assembled (`assembled` bytes so far) over
/// `limit` is refused from its header, before its payload is read, with
/// the reason `over` gives.
pub(super) fn take_whole(
    buf: &mut BytesMut,
    header: fn(&[u8]) -> Result<Option<Header>, Violation>,
    assembled: usize,
    limit: usize,
    over: impl FnOnce() -> String,
) -> Result<Option<(Header, BytesMut)>, Violation> {
    let Some(h) = header(buf)? else {
        return Ok(None);
    };
    if !h.is_control() {
        let fits = usize::try_from(h.payload_len)
            .ok()
            .and_then(|n| n.checked_add(assembled))
            .is_some_and(|n| n <= limit);
        if !fits {
            return Err(Violation::too_big(over()));
        }
    }
    // Bounded by the limit or by 125, checked above and in `header`.
    let len = usize::try_from(h.payload_len)
        .map_err(|_| Violation::too_big("frame too long"))?
        .saturating_add(h.header_len);
    if buf.len() < len {
        buf.reserve(len - buf.len());
        return Ok(None);
    }
    let mut payload = buf.split_to(len).split_off(h.header_len);
    if let Some(key) = h.mask {
        apply_mask(&mut payload, key);
    }
    Ok(Some((h, payload)))
}

/// XORs `payload` with `mask` (masking and unmasking are the same).
pub(super) fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    for (byte, key) in payload.iter_mut().zip(mask.iter().cycle()) {
        *byte ^= key;
    }
}

/// One whole (FIN) frame; masked when `mask` is given (proxy → server).
pub(super) fn encode(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | (opcode & 0x0f));
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n @ 0..=125 => out.push(mask_bit | n as u8),
        n @ 126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let start = out.len() + if mask.is_some() { 4 } else { 0 };
    if let Some(key) = mask {
        out.extend_from_slice(&key);
    }
    out.extend_from_slice(payload);
    if let Some(key) = mask
        && let Some(body) = out.get_mut(start..)
    {
        apply_mask(body, key);
    }
    out
}

/// A close payload: the code, then as much of `reason` as fits a control
/// frame, cut on a character boundary.
pub(super) fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = code.to_be_bytes().to_vec();
    out.extend_from_slice(reason.get(..end).unwrap_or_default().as_bytes());
    out
}

/// A client's close payload as RFC 6455 §7.4 allows it: empty, or a code
/// one may send and a UTF-8 reason.
pub(super) fn check_close(payload: &[u8]) -> Result<(), Violation> {
    match payload {
        [] => Ok(()),
        [_] => Err(Violation::protocol("a close payload of one byte")),
        [hi, lo, reason @ ..] => {
            let code = u16::from_be_bytes([*hi, *lo]);
            let sendable = (matches!(code, 1000..=1014) && !matches!(code, 1004..=1006))
                || (3000..=4999).contains(&code);
            if !sendable {
                return Err(Violation::protocol(format!(
                    "close code {code} may not be sent"
                )));
            }
            if std::str::from_utf8(reason).is_err() {
                return Err(Violation::invalid_payload("close reason is not UTF-8"));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
