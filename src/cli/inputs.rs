//! File lists on the command line: a file, a directory (every matching file
//! under it, recursively, in a stable order) or `-` for standard input.
//!
//! A directory is walked in byte order of the path so that two machines
//! print the same report for the same tree; symbolic links to directories
//! are not followed, so a link cycle cannot make a walk endless.

use std::path::{Path, PathBuf};

use crate::report::{InputError, STDIN_NAME};

/// One input named on the command line, after directories are expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    File(PathBuf),
    Stdin,
}

impl Input {
    /// How reports name it: the path as given, or `<stdin>`.
    pub fn shown(&self) -> String {
        match self {
            Input::File(p) => p.display().to_string(),
            Input::Stdin => STDIN_NAME.to_owned(),
        }
    }
}

/// True for `*.test.yaml` / `*.test.yml`: policy test files, never policies.
pub fn is_test_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(".test.yaml") || n.ends_with(".test.yml"))
}

/// A policy file `check` takes from a directory: `.policy`, and OpenShell
/// `.yaml`/`.yml` unless it is a test file.
pub fn is_checkable(path: &Path) -> bool {
    if is_test_file(path) {
        return false;
    }
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("policy" | "yaml" | "yml")
    )
}

/// A file `fmt` takes from a directory: this language only.
pub fn is_formattable(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("policy")
}

/// Expands the command line's paths: files are kept as given (whatever
/// their name: naming a file is asking for it), directories become the
/// files under them that `wanted` accepts, and `-` is standard input (at
/// most once). A directory holding no such file is an error, so a typo in
/// a CI step does not pass silently.
pub fn expand(
    paths: &[PathBuf],
    wanted: fn(&Path) -> bool,
    what: &str,
) -> (Vec<Input>, Vec<InputError>) {
    let mut inputs = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            if inputs.contains(&Input::Stdin) {
                errors.push(InputError::new(
                    None,
                    "`-` (standard input) is given twice; it can be read once",
                ));
            } else {
                inputs.push(Input::Stdin);
            }
            continue;
        }
        if !path.is_dir() {
            inputs.push(Input::File(path.clone()));
            continue;
        }
        let mut found = Vec::new();
        if let Err(e) = walk(path, wanted, &mut found) {
            errors.push(InputError::new(
                Some(path.display().to_string()),
                format!("cannot read the directory `{}`: {e}", path.display()),
            ));
            continue;
        }
        if found.is_empty() {
            errors.push(InputError::new(
                Some(path.display().to_string()),
                format!(
                    "no {what} under `{}`; name the files, or the directory that holds them",
                    path.display()
                ),
            ));
        }
        found.sort();
        inputs.extend(found.into_iter().map(Input::File));
    }
    (inputs, errors)
}

fn walk(dir: &Path, wanted: fn(&Path) -> bool, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, wanted, out)?;
        } else if wanted(&path) && (kind.is_file() || path.is_file()) {
            out.push(path);
        }
    }
    Ok(())
}

/// Whether text from standard input is YAML rather than this language,
/// which has no file name to tell. The first line that is not blank or a
/// comment decides: a document of this language opens with `policy "…" {`
/// or `fragment "…" {`, never with a mapping key (`version: 1`,
/// `network_policies:`) or a YAML document marker, so the two cannot be
/// mistaken for each other. YAML of another schema is read as YAML too:
/// the import then says which keys it does not know, which helps more than
/// a parse error at the first colon.
pub fn reads_as_yaml(text: &str) -> bool {
    let Some(first) = text
        .lines()
        .map(|l| l.trim_start_matches('\u{feff}').trim_end())
        .find(|l| !l.trim_start().is_empty() && !l.trim_start().starts_with('#'))
    else {
        return false;
    };
    if first.starts_with("---") || first.starts_with("%YAML") {
        return true;
    }
    let Some((key, rest)) = first.split_once(':') else {
        return false;
    };
    let key = key.trim_end();
    let plain = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let quoted = key.len() >= 2 && key.starts_with('"') && key.ends_with('"');
    (plain || quoted) && (rest.is_empty() || rest.starts_with([' ', '\t']))
}

/// Standard input, whole, as text.
pub fn read_stdin() -> Result<String, InputError> {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| {
        InputError::new(
            Some(STDIN_NAME.to_owned()),
            format!("cannot read standard input: {e}"),
        )
    })?;
    Ok(text)
}

/// `a/b/../c` as `a/c`: paths relative to a test file stay readable in
/// reports (and equal to the path a person would type).
pub fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let last_is_normal =
                    matches!(out.components().next_back(), Some(Component::Normal(_)));
                if last_is_normal {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(
            normalize(Path::new("a/tests/../b.policy")),
            PathBuf::from("a/b.policy")
        );
        assert_eq!(normalize(Path::new("./../x")), PathBuf::from("../x"));
        assert_eq!(normalize(Path::new("tests/..")), PathBuf::from("."));
    }

    #[test]
    fn yaml_on_standard_input_is_told_by_its_first_line() {
        for yaml in [
            "version: 1\n",
            "# an OpenShell policy\n\nnetwork_policies:\n  a: {}\n",
            "---\nversion: 1\n",
            "\u{feff}version: 1\n",
            "\"version\": 1\n",
            "filesystem_policy:\n",
        ] {
            assert!(reads_as_yaml(yaml), "{yaml:?}");
        }
        for policy in [
            "policy \"p\" {\n}\n",
            "# version: 1\npolicy \"p\" {\n}\n",
            "fragment \"f\" {\n}\n",
            "",
            "\n# only a comment\n",
            "allow a -> host:443\n",
            "https://example.com/x\n",
        ] {
            assert!(!reads_as_yaml(policy), "{policy:?}");
        }
    }

    #[test]
    fn test_files_are_not_policies() {
        assert!(is_test_file(Path::new("p/x.test.yaml")));
        assert!(!is_checkable(Path::new("p/x.test.yaml")));
        assert!(is_checkable(Path::new("p/x.yaml")));
        assert!(is_checkable(Path::new("p/x.policy")));
        assert!(!is_formattable(Path::new("p/x.yaml")));
    }
}
