//! Any bytes as a GraphQL document, with an `operationName` before the
//! first NUL when there is one: whenever the purpose-built reader answers,
//! apollo-parser's path gives the same answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use policy_bundle::l7body::graphql::readings_for_fuzzing;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (operation_name, document) = match text.split_once('\0') {
        Some((name, document)) => (Some(name), document),
        None => (None, text),
    };
    let (fast, apollo) = readings_for_fuzzing(document, operation_name);
    if let Some(fast) = fast {
        assert_eq!(
            Ok(fast),
            apollo,
            "reader and apollo-parser differ on {document:?} ({operation_name:?})"
        );
    }
});
