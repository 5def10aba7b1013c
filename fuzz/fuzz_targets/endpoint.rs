//! Any text as a channel endpoint (`IP:PORT` or `unix:/PATH`), as a flag
//! or a bootstrap's `listen`: nothing may panic, and an endpoint that
//! parses must read back unchanged from its own text and its JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandbox_protocol::channel::Endpoint;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(e) = text.parse::<Endpoint>()
    {
        assert_eq!(e.to_string().parse::<Endpoint>().as_ref(), Ok(&e));
        let json = serde_json::to_string(&e).unwrap_or_default();
        assert_eq!(serde_json::from_str::<Endpoint>(&json).ok().as_ref(), Some(&e));
    }
    if let Ok(e) = serde_json::from_slice::<Endpoint>(data) {
        assert_eq!(e.to_string().parse::<Endpoint>().as_ref(), Ok(&e));
    }
});
