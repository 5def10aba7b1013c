//! Any bytes as each message of the sandbox protocol, as the receiving
//! side decodes and checks them: nothing may panic, and a message that
//! passes the checks must come back unchanged from its own encoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message as _;
use sandbox_protocol::{
    Binding, ExecDownKind, ExecUpKind, RelayDownKind, decode_relay_up, decode_sandbox_message,
    decode_supervisor_message, pb,
};

fuzz_target!(|data: &[u8]| {
    let b = Binding {
        sandbox_id: "sb".into(),
        generation: 1,
    };
    if let Ok(m) = decode_sandbox_message(data, &b) {
        let again = decode_sandbox_message(&m.to_pb(&b).encode_to_vec(), &b);
        assert_eq!(again.as_ref(), Ok(&m));
    }
    if let Ok(m) = decode_supervisor_message(data, &b) {
        let again = decode_supervisor_message(&m.to_pb(&b).encode_to_vec(), &b);
        assert_eq!(again.as_ref(), Ok(&m));
    }
    if let Ok(m) = decode_relay_up(data, &b) {
        let again = decode_relay_up(&m.to_pb(&b).encode_to_vec(), &b);
        assert_eq!(again.as_ref(), Ok(&m));
    }
    if let Ok(raw) = pb::RelayDown::decode(data)
        && let Ok(m) = RelayDownKind::check(raw, &b)
    {
        assert_eq!(RelayDownKind::check(m.to_pb(&b), &b).as_ref(), Ok(&m));
    }
    if let Ok(raw) = pb::ExecUp::decode(data)
        && let Ok(m) = ExecUpKind::check(raw, &b)
    {
        let again = ExecUpKind::check(m.clone().into_pb(&b), &b);
        assert_eq!(again.as_ref(), Ok(&m));
    }
    if let Ok(raw) = pb::ExecDown::decode(data)
        && let Ok(m) = ExecDownKind::check(raw, &b)
    {
        assert_eq!(ExecDownKind::check(m.to_pb(&b), &b), Ok(m));
    }
});
