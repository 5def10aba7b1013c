//! Policies compiled from memory (the gateway's uploads) give the same
//! bundle as from disk, and never read a file.

use policy_lang::load;
use policy_lang::source::SourceFile;

const POLICY: &str =
    "policy \"p\" {\n  binaries tools = /usr/bin/curl\n  allow tools -> api.example.com:443\n}\n";

#[test]
fn the_same_source_compiles_to_the_same_bundle_from_memory_and_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.policy");
    std::fs::write(&path, POLICY).unwrap();
    let (_, from_disk) = load::compile_file(&path, None).unwrap();
    let (checked, from_memory) = load::compile_sources(SourceFile::new("p.policy", POLICY), None);
    assert!(!checked.has_errors());
    assert_eq!(from_disk.unwrap().digest, from_memory.unwrap().digest);
}

#[test]
fn an_include_is_an_error_and_nothing_is_read() {
    let src = "policy \"p\" {\n  include \"/etc/passwd\"\n  binaries tools = /usr/bin/curl\n}\n";
    let (checked, bundle) = load::compile_sources(SourceFile::new("p.policy", src), None);
    assert!(bundle.is_none());
    let messages: Vec<_> = checked
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .collect();
    assert!(
        messages.iter().any(|m| m.contains("cannot include `/etc/passwd`: this policy was not read from disk")),
        "{messages:?}"
    );
    assert_eq!(checked.sources.len(), 1, "no fragment was loaded");
}
