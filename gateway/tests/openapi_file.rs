//! `docs/openapi.yaml` is the generated document, checked in: it must be
//! exactly what `openshell-gateway openapi` prints, so a change to a wire
//! type or a route that is not regenerated fails here with the diff.

#![cfg(test)]

const REGENERATE: &str = "cargo run -p gateway -- openapi > docs/openapi.yaml";

/// A line diff (`-` checked in, `+` generated) with two lines of
/// context, from a longest common subsequence; empty when equal.
fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // lcs[i][j]: the common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', i, a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', i, a[i]));
            i += 1;
        } else {
            ops.push(('+', i, b[j]));
            j += 1;
        }
    }
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let mut out = String::new();
    let mut last_shown = None;
    for (k, (tag, line_no, text)) in ops.iter().enumerate() {
        let near = changed.iter().any(|&c| c.abs_diff(k) <= 2);
        if !near {
            continue;
        }
        if last_shown.is_some_and(|l: usize| l + 1 != k) || last_shown.is_none() {
            out.push_str(&format!("@@ docs/openapi.yaml line {} @@\n", line_no + 1));
        }
        out.push_str(&format!("{tag}{text}\n"));
        last_shown = Some(k);
    }
    out
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
    let checked_in = std::fs::read_to_string(path).unwrap();
    let generated = gateway::openapi::yaml().unwrap();
    let d = diff(&checked_in, &generated);
    assert!(
        checked_in == generated,
        "docs/openapi.yaml is not what the code generates (- checked in, + generated):\n{d}\nregenerate it with `{REGENERATE}`"
    );
    // What is checked in reads back as the document itself.
    let text = checked_in.strip_prefix(gateway::openapi::HEADER).unwrap();
    let read: serde_json::Value = serde_yaml::from_str(text).unwrap();
    assert_eq!(read, gateway::openapi::document());
}

#[test]
fn the_diff_shows_what_changed_and_nothing_when_equal() {
    let old = "a\nb\nc\nd\ne\nf\ng\n";
    assert_eq!(diff(old, old), "");
    let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
    let d = diff(old, new);
    assert!(d.contains("-d\n+D\n"), "{d}");
    assert!(d.contains("+h\n"), "{d}");
    assert!(d.contains(" c\n") && !d.contains(" a\n"), "{d}");
}

/// The command the failure names prints the same document.
#[test]
fn the_openapi_command_prints_the_generated_document() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_openshell-gateway"))
        .arg("openapi")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        gateway::openapi::yaml().unwrap()
    );
}
