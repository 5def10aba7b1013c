//! Any bytes through the deny-log reader, line by line as `suggest` reads
//! a log: no panic; a line read as a denial names a destination, and still
//! reads as a denial when written back as JSON. Then the whole advisor on
//! the same bytes, against a small policy: whatever rules it writes for
//! the denials it names, the patched policy compiles.
#![no_main]

use std::sync::OnceLock;

use advisor::denylog::{Entry, read_line};
use libfuzzer_sys::fuzz_target;
use policy_bundle::Bundle;
use policy_lang::load::compile_sources;
use policy_lang::source::SourceFile;

/// The policy the denials are read against (lines name it `fuzz`).
const POLICY: &str = "policy \"fuzz\" {\n  fs read /usr\n  allow /usr/bin/curl -> api.example.com:443 http read-only\n}\n";

fn base() -> &'static Bundle {
    static BASE: OnceLock<Bundle> = OnceLock::new();
    BASE.get_or_init(|| {
        compile_sources(SourceFile::new("p.policy".to_owned(), POLICY), None)
            .1
            .expect("the fuzz policy compiles")
    })
}

fuzz_target!(|data: &[u8]| {
    let advice = advisor::advise(POLICY, false, base(), data, "fuzz.log", &[]);
    if let (Ok(patched), false) = (&advice.patched, advice.suggestions.is_empty()) {
        let (checked, bundle) =
            compile_sources(SourceFile::new("p.policy".to_owned(), patched), None);
        assert!(
            bundle.is_some(),
            "the patched policy does not compile: {:?}\n{patched}",
            checked.diagnostics
        );
    }
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
