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

fn messages(checked: &load::Checked) -> Vec<String> {
    checked
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn every_shipped_policy_compiles_from_memory_with_its_fragments_as_from_disk() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("policy") {
            continue;
        }
        seen += 1;
        let (_, from_disk) = load::compile_file(&path, None).unwrap();
        let files = load::include_closure(&path).unwrap();
        assert!(files.contains_key("fragments/system.policy"), "{files:?}");
        let main = SourceFile::new("p.policy", std::fs::read_to_string(&path).unwrap());
        let (checked, from_memory) = load::compile_sources_with(main, &files, None);
        assert!(
            !checked.has_errors(),
            "{}: {:?}",
            path.display(),
            messages(&checked)
        );
        assert_eq!(
            from_disk.unwrap().digest,
            from_memory.unwrap().digest,
            "{}",
            path.display()
        );
    }
    assert_eq!(seen, 10);
}

const FRAGMENT: &str = "fragment \"f\" {\n  binaries tools = /usr/bin/curl\n}\n";

fn with_include(path: &str) -> String {
    format!("policy \"p\" {{\n  include \"{path}\"\n  allow tools -> api.example.com:443\n}}\n")
}

#[test]
fn included_paths_never_leave_the_map_and_are_named_where_they_fail() {
    let files: std::collections::BTreeMap<String, String> =
        [("f/a.policy".to_owned(), FRAGMENT.to_owned())].into();
    for (path, expected) in [
        ("../etc/passwd", "the path leaves the policy's directory"),
        ("f/../../a.policy", "the path leaves the policy's directory"),
        ("/etc/passwd", "the path is absolute"),
        ("f/b.policy", "the proposal carries no file `f/b.policy`"),
    ] {
        let main = SourceFile::new("p.policy", with_include(path));
        let (checked, bundle) = load::compile_sources_with(main, &files, None);
        assert!(bundle.is_none(), "{path}");
        let d = checked
            .diagnostics
            .iter()
            .find(|d| d.message.contains(expected))
            .unwrap_or_else(|| panic!("{path}: {:?}", messages(&checked)));
        let json = d.to_json();
        assert_eq!(json["code"], "E0103", "{json}");
        assert_eq!(json["file"], "p.policy", "{json}");
        assert_eq!(json["line"], 2, "{json}");
    }
    // `.` and `..` that stay inside fold away.
    let main = SourceFile::new("p.policy", with_include("./f/x/../a.policy"));
    let (checked, bundle) = load::compile_sources_with(main, &files, None);
    assert!(bundle.is_some(), "{:?}", messages(&checked));
}

#[test]
fn a_cycle_of_fragments_in_memory_is_an_error_at_the_include() {
    let files: std::collections::BTreeMap<String, String> = [
        (
            "f/a.policy".to_owned(),
            "fragment \"a\" {\n  include \"b.policy\"\n  binaries tools = /usr/bin/curl\n}\n"
                .to_owned(),
        ),
        (
            "f/b.policy".to_owned(),
            "fragment \"b\" {\n  include \"a.policy\"\n}\n".to_owned(),
        ),
    ]
    .into();
    let main = SourceFile::new("p.policy", with_include("f/a.policy"));
    let (checked, bundle) = load::compile_sources_with(main, &files, None);
    assert!(bundle.is_none());
    let d = checked
        .diagnostics
        .iter()
        .find(|d| d.message.contains("includes itself"))
        .unwrap_or_else(|| panic!("{:?}", messages(&checked)));
    assert_eq!(d.to_json()["file"], "f/b.policy");
}

#[test]
fn the_closure_follows_includes_through_fragments() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("f")).unwrap();
    std::fs::write(
        dir.path().join("f/a.policy"),
        "fragment \"a\" {\n  include \"b.policy\"\n}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("f/b.policy"), FRAGMENT).unwrap();
    std::fs::write(dir.path().join("p.policy"), with_include("f/a.policy")).unwrap();
    let files = load::include_closure(&dir.path().join("p.policy")).unwrap();
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        ["f/a.policy", "f/b.policy"]
    );
    let (_, disk) = load::compile_file(&dir.path().join("p.policy"), None).unwrap();
    let main = SourceFile::new("p.policy", with_include("f/a.policy"));
    let (_, memory) = load::compile_sources_with(main, &files, None);
    assert_eq!(disk.unwrap().digest, memory.unwrap().digest);
}
