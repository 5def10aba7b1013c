//! The string partition: atoms are disjoint, cover the universe, and each
//! witness has exactly its atom's signature.

use policy_lang::matcher::{BinaryGlob, HostPattern, HttpPathGlob};
use prover::strings::{DimSpec, Partition, PatternKind, PatternSet, Size, universe};

fn path_spec() -> DimSpec {
    DimSpec {
        universe: universe::http_paths(),
        valid: |s| universe::is_canonical_path(s, false),
    }
}

#[expect(clippy::unwrap_used, reason = "test helper")]
fn paths(pats: &[&str]) -> (Partition, Vec<HttpPathGlob>) {
    let mut set = PatternSet::default();
    let globs: Vec<HttpPathGlob> = pats
        .iter()
        .map(|p| HttpPathGlob::parse(p).unwrap())
        .collect();
    for g in &globs {
        let kind = if g.is_exact() {
            PatternKind::Exact(g.literal_prefix())
        } else {
            PatternKind::Glob {
                regex: g.to_regex(),
                example: g.example(),
            }
        };
        set.add(g.as_str(), kind);
    }
    (Partition::build(set, &path_spec()).unwrap(), globs)
}

fn check_witnesses(p: &Partition, matches: &dyn Fn(u32, &str) -> bool, n: usize) {
    for (i, a) in p.atoms.iter().enumerate() {
        assert_eq!(
            p.classify(&a.witness),
            Some(i as u32),
            "witness {} of atom {i}",
            a.witness
        );
        for k in 0..n as u32 {
            assert_eq!(
                a.sig.contains(&k),
                matches(k, &a.witness),
                "atom {i} `{}` pattern {k}",
                a.witness
            );
        }
    }
}

#[test]
fn path_atoms() {
    let pats = [
        "/**",
        "/repos/**",
        "/repos/*/*/rulesets/**",
        "/repos/o/r",
        "/*/*/info/refs",
    ];
    let (p, globs) = paths(&pats);
    check_witnesses(&p, &|k, s| globs[k as usize].matches(s), pats.len());
    assert!(p.atoms.iter().any(|a| a.exact && a.witness == "/repos/o/r"));
    // `/**` covers every canonical path: no atom outside it.
    assert!(p.atoms.iter().all(|a| a.sig.contains(&0)));
    let everything = p.atoms_of("/**");
    assert_eq!(everything.len(), p.atoms.len());
}

#[test]
fn dot_segments_are_not_paths() {
    let (p, _) = paths(&["/*", "/[!.]*"]);
    // `/*` minus `/[!.]*` would be `/.`, `/..`, `/.x`...: `/.x` is canonical.
    for a in &p.atoms {
        assert!(
            universe::is_canonical_path(&a.witness, false),
            "{}",
            a.witness
        );
    }
    let (p, _) = paths(&["/?", "/[!.]"]);
    // `/?` minus `/[!.]` is only `/.`, which is not canonical: no atom.
    assert!(p.atoms.iter().all(|a| a.sig != vec![0]), "{:?}", p.atoms);
}

#[test]
fn host_atoms_and_sizes() {
    let pats = [
        "*.githubusercontent.com",
        "raw.githubusercontent.com",
        "**.example.com",
        "a.example.com",
        "api-*.example.com",
    ];
    let mut set = PatternSet::default();
    let hs: Vec<HostPattern> = pats
        .iter()
        .map(|p| HostPattern::parse(p).unwrap())
        .collect();
    for h in &hs {
        let kind = match h.exact() {
            Some(e) => PatternKind::Exact(e.to_owned()),
            None => PatternKind::Glob {
                regex: h.to_regex(),
                example: h.example(),
            },
        };
        set.add(h.as_str(), kind);
    }
    let spec = DimSpec {
        universe: universe::hosts(),
        valid: universe::is_normal_host,
    };
    let p = Partition::build(set, &spec).unwrap();
    check_witnesses(&p, &|k, s| hs[k as usize].matches(s), pats.len());
    let wild = p.atoms.iter().find(|a| a.sig == vec![0]).unwrap();
    assert_eq!(wild.size, Size::Infinite);
    assert!(wild.witness.ends_with(".githubusercontent.com"));
    assert_eq!(
        p.classify("raw.githubusercontent.com")
            .map(|a| p.atoms[a as usize].exact),
        Some(true)
    );
}

#[test]
fn binary_atoms() {
    let pats = [
        "/usr/bin/*",
        "/usr/bin/git",
        "/sandbox/**",
        "/sandbox/.uv/python/**/python3*",
        "/**",
    ];
    let mut set = PatternSet::default();
    let bs: Vec<BinaryGlob> = pats.iter().map(|p| BinaryGlob::parse(p).unwrap()).collect();
    for b in &bs {
        let kind = match b.exact() {
            Some(e) => PatternKind::Exact(e.to_owned()),
            None => PatternKind::Glob {
                regex: b.to_regex(),
                example: b.example(),
            },
        };
        set.add(b.as_str(), kind);
    }
    let spec = DimSpec {
        universe: universe::binaries(),
        valid: universe::is_resolved_binary,
    };
    let p = Partition::build(set, &spec).unwrap();
    check_witnesses(&p, &|k, s| bs[k as usize].matches(s), pats.len());
    assert_eq!(p.atoms.len(), 5, "{:#?}", p.atoms);
}

#[test]
fn many_paths_stay_fast() {
    let mut pats: Vec<String> = Vec::new();
    for i in 0..150 {
        pats.push(format!("/api/v{}/svc{}/**", i % 7, i));
        pats.push(format!("/repos/*/*/svc{i}/*"));
    }
    pats.push("/**".into());
    pats.push("/**/info/refs".into());
    let refs: Vec<&str> = pats.iter().map(String::as_str).collect();
    let t = std::time::Instant::now();
    let (p, globs) = paths(&refs);
    eprintln!(
        "{} patterns -> {} atoms in {:?}",
        pats.len(),
        p.atoms.len(),
        t.elapsed()
    );
    for a in p.atoms.iter().take(50) {
        for (k, g) in globs.iter().enumerate() {
            assert_eq!(a.sig.contains(&(k as u32)), g.matches(&a.witness));
        }
    }
}
