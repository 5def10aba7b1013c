//! The string partition: atoms are disjoint, cover the universe, and each
//! witness has exactly its atom's signature.

use policy_bundle::matcher::{BinaryGlob, HostPattern, HttpPathGlob};
use prover::strings::search::{self, Outcome};
use prover::strings::validity::{Rule, Validity};
use prover::strings::{Atom, DimSpec, Partition, PatternKind, PatternSet, Size, universe};

/// The witness of an atom; every atom of these tests must have one.
#[expect(clippy::panic, reason = "test helper")]
fn w(a: &Atom) -> &str {
    a.witness
        .as_deref()
        .unwrap_or_else(|| panic!("atom without witness: {a:?}"))
}

fn path_spec() -> DimSpec {
    DimSpec {
        universe: universe::http_paths(),
        valid: |s| universe::is_canonical_path(s, false),
        rule: Rule::HttpPath {
            encoded_slash: false,
        },
        budget: search::BUDGET,
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
            p.classify(w(a)),
            Some(i as u32),
            "witness {} of atom {i}",
            w(a)
        );
        for k in 0..n as u32 {
            assert_eq!(
                a.sig.contains(&k),
                matches(k, w(a)),
                "atom {i} `{}` pattern {k}",
                w(a)
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
    assert!(p.atoms.iter().any(|a| a.exact && w(a) == "/repos/o/r"));
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
        assert!(universe::is_canonical_path(w(a), false), "{}", w(a));
    }
    let (p, _) = paths(&["/?", "/[!.]"]);
    // `/?` minus `/[!.]` is only `/.`, which is not canonical: no atom.
    assert!(p.atoms.iter().all(|a| a.sig != vec![0]), "{:?}", p.atoms);
}

#[test]
fn empty_segments_of_a_shortest_string_are_filled_without_a_search() {
    let pats = ["/repos/*/*", "/*/*/git-upload-pack"];
    let (p, globs) = paths(&pats);
    check_witnesses(&p, &|k, s| globs[k as usize].matches(s), pats.len());
    // The shortest string of both, `/repos//git-upload-pack`, is not
    // canonical; spelled with `x` it is, and no search is needed.
    let both = p.atoms.iter().find(|a| a.sig == vec![0, 1]);
    assert_eq!(both.map(w), Some("/repos/x/git-upload-pack"));
    assert!(p.phases.ends_with("(0 searched)"), "{}", p.phases);
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
        rule: Rule::Any,
        budget: search::BUDGET,
    };
    let p = Partition::build(set, &spec).unwrap();
    check_witnesses(&p, &|k, s| hs[k as usize].matches(s), pats.len());
    let wild = p.atoms.iter().find(|a| a.sig == vec![0]).unwrap();
    assert_eq!(wild.size, Size::Infinite);
    assert!(w(wild).ends_with(".githubusercontent.com"));
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
    let (p, bs) = binaries(&pats, search::BUDGET);
    check_witnesses(&p, &|k, s| bs[k as usize].matches(s), pats.len());
    assert_eq!(p.atoms.len(), 5, "{:#?}", p.atoms);
}

fn binary_spec(budget: usize) -> DimSpec {
    DimSpec {
        universe: universe::binaries(),
        valid: universe::is_resolved_binary,
        rule: Rule::Binary,
        budget,
    }
}

#[expect(clippy::unwrap_used, reason = "test helper")]
fn binaries(pats: &[&str], budget: usize) -> (Partition, Vec<BinaryGlob>) {
    let mut set = PatternSet::default();
    let bs: Vec<BinaryGlob> = pats.iter().map(|p| BinaryGlob::parse(p).unwrap()).collect();
    for b in &bs {
        if b.as_str().contains(['?', '[']) || !b.as_str().is_ascii() {
            set.needs_chars();
        }
        let kind = match b.exact() {
            Some(e) => PatternKind::Exact(e.to_owned()),
            None => PatternKind::Glob {
                regex: b.to_regex(),
                example: b.example(),
            },
        };
        set.add(b.as_str(), kind);
    }
    (Partition::build(set, &binary_spec(budget)).unwrap(), bs)
}

/// `/usr/bin/*/**` minus `/usr/bin/*` is `/usr/bin/x/y` and deeper; every
/// shortest string into that part of the automaton (`/usr/bin//`,
/// `/usr/bin//x`, ...) has an empty component, which no executable path
/// has. The search once gave up on those and dropped the atom, and a
/// widening from `/usr/bin/*` to `/usr/bin/**` went unreported.
#[test]
fn deeper_binaries_are_an_atom_with_a_witness() {
    let (p, bs) = binaries(&["/usr/bin/*", "/usr/bin/*/**"], search::BUDGET);
    check_witnesses(&p, &|k, s| bs[k as usize].matches(s), bs.len());
    let deeper = p
        .atoms
        .iter()
        .find(|a| a.sig == vec![1])
        .unwrap_or_else(|| panic!("no atom for `/usr/bin/*/**` alone: {:#?}", p.atoms));
    assert_eq!(w(deeper), "/usr/bin/x/x");
    assert_eq!(deeper.size, Size::Infinite);
}

/// Binary automata read bytes unless a pattern needs characters; both
/// readings classify valid paths alike.
#[test]
fn binary_atoms_bytes_and_characters() {
    for pats in [
        &["/usr/bin/*", "/usr/bin/*/**", "/opt/**"][..],
        &["/usr/bin/?", "/usr/bin/*", "/usr/bin/é*"][..],
    ] {
        let (p, bs) = binaries(pats, search::BUDGET);
        check_witnesses(&p, &|k, s| bs[k as usize].matches(s), bs.len());
        for s in [
            "/usr/bin/é",
            "/usr/bin/éa",
            "/usr/bin/a/é",
            "/opt/é/x",
            "/usr/bin/\u{10348}",
        ] {
            let atom = p.classify(s).map(|a| &p.atoms[a as usize]);
            for (k, b) in bs.iter().enumerate() {
                assert_eq!(
                    atom.is_some_and(|a| a.sig.contains(&(k as u32))),
                    b.matches(s),
                    "{s} against {b}"
                );
            }
        }
    }
}

/// An atom whose search gives up is kept without a witness (never
/// dropped), with the reason.
#[test]
fn an_atom_the_search_gives_up_on_is_kept_without_witness() {
    // The shortest strings of the deeper atom have an empty first
    // component, and spelling it `x` leaves the atom: only a search finds
    // a witness, and this one may not look.
    let (p, _) = binaries(&["/usr/bin/*", "/usr/bin/*/**", "/usr/bin/*x*/**"], 0);
    let deeper = p
        .atoms
        .iter()
        .find(|a| a.sig == vec![1])
        .unwrap_or_else(|| panic!("atom dropped: {:#?}", p.atoms));
    assert!(deeper.witness.is_none(), "{deeper:?}");
    assert!(deeper.unwitnessed.is_some());
    // The string still classifies into that atom.
    assert_eq!(
        p.classify("/usr/bin/a/b")
            .map(|i| p.atoms[i as usize].sig.clone()),
        Some(vec![1])
    );
}

/// The search outcomes themselves: found, proved empty, unknown.
#[test]
fn search_finds_proves_empty_or_says_unknown() {
    let re = |pats: &[&str]| -> prover::strings::dfa::MultiDfa {
        let mut all = vec!["/(?s:.*)".to_owned()];
        all.extend(
            pats.iter()
                .map(|p| format!("(?:{})", HttpPathGlob::parse(p).unwrap().to_regex())),
        );
        prover::strings::dfa::MultiDfa::build(&all, false).unwrap()
    };
    let canon = |s: &str| universe::is_canonical_path(s, false);
    let v = Validity::of(Rule::HttpPath {
        encoded_slash: false,
    });
    let none = |_: &str| false;
    // `/?` and not `/[!.]`: only `/.`, not canonical — proved empty.
    let dfa = re(&["/?", "/[!.]"]);
    assert_eq!(
        search::witness(&dfa, &[0, 1], v, 1, &none, &canon, search::BUDGET),
        Outcome::Empty
    );
    // `/*` and not `/[!.]*`: `/.x` is canonical.
    let dfa = re(&["/*", "/[!.]*"]);
    assert_eq!(
        search::witness(&dfa, &[0, 1], v, 1, &none, &canon, search::BUDGET),
        Outcome::Found("/.x".to_owned())
    );
    // Named strings are skipped, and when they are all there is, the atom
    // is empty.
    let dfa = re(&["/[ab]"]);
    let named = |s: &str| s == "/a" || s == "/b";
    assert_eq!(
        search::witness(&dfa, &[0, 1], v, 3, &named, &canon, search::BUDGET),
        Outcome::Empty
    );
    let named = |s: &str| s == "/a";
    assert_eq!(
        search::witness(&dfa, &[0, 1], v, 2, &named, &canon, search::BUDGET),
        Outcome::Found("/b".to_owned())
    );
    // Out of budget: unknown, not empty.
    assert!(matches!(
        search::witness(&dfa, &[0, 1], v, 1, &none, &canon, 2),
        Outcome::Unknown(_)
    ));
    // A predicate stricter than the automaton: unknown, not empty.
    let strict = |_: &str| false;
    assert!(matches!(
        search::witness(&dfa, &[0, 1], v, 1, &none, &strict, search::BUDGET),
        Outcome::Unknown(_)
    ));
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
            assert_eq!(a.sig.contains(&(k as u32)), g.matches(w(a)));
        }
    }
}
