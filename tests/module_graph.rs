//! Inside each crate, source files do not import each other in a circle
//! (docs/architecture.md, "Crates"). The one shape allowed is a module and
//! its own descendants: a module directory's `mod.rs` (or `x.rs` beside
//! `x/`) holds what its files share and calls into them, and they use it.
//!
//! A file's module is found from its place under `src/` (and `#[path]`
//! attributes); its dependencies are the `crate::` and `super::` paths in
//! its code (comments and `#[cfg(test)]` modules at the end of a file left
//! out). Each path counts for the deepest module it names that is a file.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "a test of the source tree fails loudly on what it cannot read"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Circles kept on purpose, each with the reason written beside it in the
/// source. A pair is `(crate directory, [modules in the circle])`.
const ALLOWED: &[(&str, &[&str])] = &[(
    "policy-lang",
    // `patterns` re-exports `query_glob::query_value`, which translates one
    // query value with `patterns`' own glob translation.
    &["import::patterns", "import::query_glob"],
)];

type Module = Vec<String>;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crate_dirs() -> Vec<PathBuf> {
    let root = workspace();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    let list = members
        .split_once('[')
        .unwrap()
        .1
        .split_once(']')
        .unwrap()
        .0;
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m))
        .collect()
}

/// Every `.rs` file under `src/`, with the module it is.
fn modules(src: &Path) -> BTreeMap<PathBuf, Module> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap();
                let mut parts: Module = rel
                    .iter()
                    .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                    .collect();
                if matches!(
                    parts.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    parts.pop();
                }
                if parts.first().is_some_and(|p| p == "bin") {
                    continue;
                }
                out.insert(path, parts);
            }
        }
    }
    // `#[path = "x_tests.rs"] mod tests;` makes that file `<module>::tests`.
    let declared: Vec<(PathBuf, Module)> = out
        .iter()
        .flat_map(|(file, module)| {
            let text = std::fs::read_to_string(file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let mut found = Vec::new();
            for (i, line) in lines.iter().enumerate() {
                let Some(target) = line
                    .trim()
                    .strip_prefix("#[path = \"")
                    .and_then(|r| r.strip_suffix("\"]"))
                else {
                    continue;
                };
                let name = lines[i + 1..]
                    .iter()
                    .find_map(|l| l.trim().strip_prefix("mod "))
                    .and_then(|r| r.strip_suffix(';'))
                    .expect("a #[path] attribute is followed by its mod line");
                let mut m = module.clone();
                m.push(name.to_string());
                found.push((file.parent().unwrap().join(target), m));
            }
            found
        })
        .collect();
    for (file, module) in declared {
        out.insert(file, module);
    }
    out
}

/// The code of a file: comments removed, and the test module at its end
/// (which names `super::*` as its own parent) cut off.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim() == "#[cfg(test)]" && !out.is_empty() {
            let rest = text.split_once(line).map_or("", |(_, r)| r);
            if rest.trim_start().starts_with("mod tests {") {
                break;
            }
        }
        let line = line.split_once("//").map_or(line, |(code, _)| code);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module paths a piece of code names through `crate::` and `super::`,
/// groups (`crate::{a, b::c}`) expanded one level.
fn named_paths(code: &str, module: &Module) -> Vec<Module> {
    let mut out = Vec::new();
    let ident = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", module[..module.len().saturating_sub(1)].to_vec()),
    ] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            let mut tails = Vec::new();
            if let Some(group) = rest.strip_prefix('{') {
                let body = group.split_once('}').map_or(group, |(b, _)| b);
                tails.extend(body.split(',').map(|t| ident(t.trim())));
            } else {
                tails.push(ident(rest));
            }
            for tail in tails {
                let mut path = base.clone();
                path.extend(tail);
                out.push(path);
            }
        }
    }
    out
}

fn is_prefix(a: &Module, b: &Module) -> bool {
    a.len() <= b.len() && b[..a.len()] == a[..]
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<Module>> {
    struct State<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        on_stack: BTreeSet<&'g Module>,
        out: Vec<BTreeSet<Module>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g Module) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn graph_of(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = modules(src);
    let known: BTreeSet<&Module> = files.values().collect();
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (file, module) in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for path in named_paths(&code(&text), module) {
            let Some(target) = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| known.contains(p))
            else {
                continue;
            };
            if !is_prefix(&target, module) && !is_prefix(module, &target) {
                deps.insert(target);
            }
        }
    }
    graph
}

fn render(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_crate_has_a_circle_between_its_modules() {
    let mut found = Vec::new();
    for dir in crate_dirs() {
        let src = dir.join("src");
        let name = dir
            .strip_prefix(workspace())
            .unwrap()
            .to_string_lossy()
            .to_string();
        for circle in circles(&graph_of(&src)) {
            let names: BTreeSet<String> = circle.iter().map(render).collect();
            let allowed = ALLOWED.iter().any(|(c, members)| {
                *c == name && names == members.iter().map(|m| m.to_string()).collect()
            });
            if !allowed {
                let crate_name = if name.is_empty() { "." } else { &name };
                found.push(format!(
                    "{crate_name}: {}",
                    names.into_iter().collect::<Vec<_>>().join(" ⇄ ")
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other in a circle (move what both need into a module of its own):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_a_circle() {
    let dir = tempfile_dir();
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod inner;\nuse inner::X;\n").unwrap();
    // A child using its parent is the allowed shape.
    std::fs::write(src.join("a/inner.rs"), "use super::Y;\nuse crate::b::Z;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{c::W, d};\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "// use crate::b::nothing;\nuse crate::a::inner::Q;\n",
    )
    .unwrap();
    let found = circles(&graph_of(&src));
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| c.iter().map(render).collect())
        .collect();
    assert_eq!(names, vec![vec!["a::inner", "b", "c"]]);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
