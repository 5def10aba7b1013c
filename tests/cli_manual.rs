//! Shell completions and manual pages, generated from the clap
//! definitions: every command is in them.

mod common;

use common::{code, run, text};

const VERSION: &str = env!("CARGO_PKG_VERSION");

const COMMANDS: [&str; 10] = [
    "check",
    "compile",
    "explain",
    "eval",
    "fmt",
    "import",
    "diff",
    "test",
    "completions",
    "man",
];

#[test]
fn the_bash_completion_names_every_command() {
    let o = run(&["completions", "bash"]);
    assert_eq!(code(&o), 0);
    let script = text(&o.stdout);
    assert!(
        script.contains("complete -F _openshell__policy"),
        "{script}"
    );
    for c in COMMANDS {
        assert!(
            script.contains(&format!("cmd=\"openshell__policy__subcmd__{c}\"")),
            "`{c}` missing"
        );
    }
    for shell in ["zsh", "fish"] {
        let o = run(&["completions", shell]);
        assert_eq!(code(&o), 0);
        assert!(text(&o.stdout).contains("check"), "{shell}");
    }
}

#[test]
fn a_manual_page_renders_for_every_command() {
    let o = run(&["man"]);
    assert_eq!(code(&o), 0);
    let page = text(&o.stdout);
    assert!(
        page.starts_with(".ie") && page.contains(".TH openshell-policy 1"),
        "{page}"
    );
    for c in COMMANDS {
        let o = run(&["man", c]);
        assert_eq!(code(&o), 0, "{c}");
        let page = text(&o.stdout);
        assert!(
            page.contains(&format!(".TH openshell-policy-{c} 1")),
            "{c}: {page}"
        );
        assert!(page.contains(".SH SYNOPSIS"), "{c}");
    }
    let d = std::env::temp_dir().join(format!("osp-man-{}", std::process::id()));
    let o = run(&["man", "--out", d.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", text(&o.stderr));
    for c in COMMANDS {
        let page = std::fs::read_to_string(d.join(format!("openshell-policy-{c}.1"))).unwrap();
        assert!(page.contains(&format!("openshell\\-policy\\-{c}")), "{c}");
    }
    // Every page, written or printed, says which release it documents.
    let th = |name: &str| format!(".TH {name} 1  \"openshell-policy {VERSION}\"");
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|f| f.strip_suffix(".1").map(str::to_owned))
        .collect();
    names.sort();
    assert!(names.len() > COMMANDS.len(), "{names:?}");
    for name in &names {
        let page = std::fs::read_to_string(d.join(format!("{name}.1"))).unwrap();
        let title = page.lines().find(|l| l.starts_with(".TH")).unwrap_or("");
        assert!(title.starts_with(&th(name)), "{name}: {title}");
    }
    for c in COMMANDS {
        let page = text(&run(&["man", c]).stdout);
        assert!(page.contains(&th(&format!("openshell-policy-{c}"))), "{c}");
    }
    assert_eq!(code(&run(&["man", "nosuch"])), 2);
}
