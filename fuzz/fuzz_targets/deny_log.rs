//! Any bytes through the deny-log reader, line by line as `suggest` reads
//! a log: no panic; a line read as a denial names a destination, and still
//! reads as a denial when written back as JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use advisor::denylog::{Entry, read_line};

fuzz_target!(|data: &[u8]| {
    for line in data.split(|b| *b == b'\n') {
        let Ok(text) = std::str::from_utf8(line) else {
            continue;
        };
        match read_line(text) {
            Ok(Entry::Denial(d)) => {
                assert!(d.host.is_some() || d.ip.is_some(), "{text}");
                let again = serde_json::from_str::<serde_json::Value>(text)
                    .map(|v| v.to_string())
                    .map(|t| read_line(&t));
                assert!(matches!(again, Ok(Ok(Entry::Denial(_)))), "{text}");
            }
            Ok(_) => {}
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
});
