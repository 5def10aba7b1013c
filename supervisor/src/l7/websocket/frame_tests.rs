use super::*;

fn masked(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = encode(opcode, payload, Some([1, 2, 3, 4]));
    if !fin {
        f[0] &= 0x7f;
    }
    f
}

#[test]
fn a_masked_frame_round_trips() {
    let f = masked(true, OP_TEXT, b"hello");
    let h = client_header(&f).unwrap().unwrap();
    assert_eq!(h.opcode, OP_TEXT);
    assert!(h.fin);
    assert_eq!(h.payload_len, 5);
    assert_eq!(h.header_len, 6);
    let mut payload = f[h.header_len..].to_vec();
    apply_mask(&mut payload, h.mask.unwrap());
    assert_eq!(payload, b"hello");
}

#[test]
fn lengths_take_their_three_forms() {
    for (len, header_len) in [(125, 6), (126, 8), (65_535, 8), (65_536, 14)] {
        let f = masked(true, OP_BINARY, &vec![0; len]);
        let h = client_header(&f).unwrap().unwrap();
        assert_eq!(h.payload_len, len as u64);
        assert_eq!(h.header_len, header_len);
        assert_eq!(
            server_frame_len(&encode(OP_BINARY, &vec![0; len], None)),
            Some((header_len - 4, len as u64))
        );
    }
}

#[test]
fn an_incomplete_header_asks_for_more() {
    let f = masked(true, OP_TEXT, &[0; 300]);
    for cut in 0..8 {
        assert_eq!(client_header(&f[..cut]), Ok(None), "{cut} bytes");
    }
    assert!(client_header(&f[..8]).unwrap().is_some());
}

#[test]
fn frames_the_server_could_read_otherwise_are_refused() {
    let mut rsv1 = masked(true, OP_TEXT, b"x");
    rsv1[0] |= 0x40;
    let unmasked = encode(OP_TEXT, b"x", None);
    let reserved = masked(true, 0x3, b"x");
    let long_ping = masked(true, OP_PING, &[0; 126]);
    let fragmented_ping = masked(false, OP_PING, b"x");
    let mut top_bit = vec![0x81, 0x80 | 127];
    top_bit.extend_from_slice(&(1_u64 << 63).to_be_bytes());
    top_bit.extend_from_slice(&[0; 4]);
    let not_minimal = vec![0x81, 0x80 | 126, 0, 5, 0, 0, 0, 0];
    for f in [
        rsv1,
        unmasked,
        reserved,
        long_ping,
        fragmented_ping,
        top_bit,
        not_minimal,
    ] {
        let v = client_header(&f).unwrap_err();
        assert_eq!(v.code, close::PROTOCOL_ERROR, "{f:?}: {v:?}");
    }
}

#[test]
fn close_payloads_are_checked_as_rfc_6455_says() {
    assert_eq!(check_close(&[]), Ok(()));
    assert_eq!(check_close(&close_payload(1000, "bye")), Ok(()));
    assert_eq!(check_close(&close_payload(4000, "")), Ok(()));
    assert_eq!(check_close(&[3]).unwrap_err().code, close::PROTOCOL_ERROR);
    for code in [999, 1004, 1005, 1006, 1015, 2999, 5000] {
        assert_eq!(
            check_close(&close_payload(code, "")).unwrap_err().code,
            close::PROTOCOL_ERROR,
            "{code}"
        );
    }
    let mut bad_reason = close_payload(1000, "");
    bad_reason.push(0xff);
    assert_eq!(
        check_close(&bad_reason).unwrap_err().code,
        close::INVALID_PAYLOAD
    );
}

#[test]
fn a_close_reason_fits_a_control_frame() {
    let long = "é".repeat(100);
    let p = close_payload(1008, &long);
    assert!(p.len() <= 125);
    assert_eq!(&p[..2], &1008_u16.to_be_bytes());
    assert!(std::str::from_utf8(&p[2..]).is_ok());
}
