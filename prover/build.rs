//! Reads the embedded binary registry (`registry/binaries/*.yaml`) once, at
//! build time, into a static table (`$OUT_DIR/embedded_registry.rs`): every
//! run needs it, and parsing the YAML cost more than building the atoms of
//! a typical policy.

use std::fmt::Write as _;
use std::path::Path;

#[path = "src/registry_format.rs"]
mod registry_format;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new("registry/binaries");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The embedded registry files' entries, in file-name order (a later\n\
         /// entry for the same binary overrides an earlier one).\n\
         static EMBEDDED: &[Builtin] = &[\n",
    );
    for f in &files {
        println!("cargo::rerun-if-changed={}", f.display());
        let text = std::fs::read_to_string(f)?;
        let entries =
            registry_format::parse(&text).map_err(|why| format!("{}: {why}", f.display()))?;
        for e in entries {
            writeln!(
                out,
                "    Builtin {{ binary: {:?}, description: {:?}, can_construct_http: {}, bypass_protocol: {:?}, can_exfiltrate: {} }},",
                e.binary, e.description, e.can_construct_http, e.bypass_protocol, e.can_exfiltrate
            )?;
        }
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR")?).join("embedded_registry.rs");
    std::fs::write(dest, out)?;
    Ok(())
}
