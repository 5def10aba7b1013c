//! Load a policy from disk: our language or OpenShell YAML (by extension),
//! the fragments it includes, and an optional OpenShell credentials file.
//! Then check (resolve + lint) or compile it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ast::{DocKind, Document, Stmt};
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::resolve::{Resolved, resolve};
use crate::source::{SourceFile, Span};
use crate::{compile, import, lint, parser};
use policy_bundle::Bundle;

/// A file could not be read; whatever is wrong inside a file is a
/// diagnostic instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The main file or the credentials file (an include that cannot be
    /// read is an `E0103` instead).
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}

pub use crate::source::is_yaml;

/// Reads a file as UTF-8 text, named by its path as given.
pub fn read_source(path: &Path) -> Result<SourceFile, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Parse one source file in the format its extension says.
pub(crate) fn parse_source(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    if is_yaml(Path::new(file.path())) {
        import::yaml_to_document(file)
    } else {
        parser::parse(file)
    }
}

/// Every document of a policy, parsed, with the diagnostics of reading
/// and parsing; [`check_loaded`] takes it from here.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The main document first, then included fragments in include order,
    /// then the credentials file (as a fragment), if any.
    pub(crate) docs: Vec<Document>,
    pub(crate) sources: Vec<SourceFile>,
    pub(crate) diagnostics: Diagnostics,
}

pub(crate) fn load(path: &Path, credentials: Option<&Path>) -> Result<Loaded, LoadError> {
    let main = read_source(path)?;
    let creds = credentials.map(read_source).transpose()?;
    Ok(load_with(main, &Fragments::Disk, creds))
}

/// Loads a policy held in memory (a gateway's upload, say): one
/// self-contained file and an optional OpenShell credentials file. Nothing
/// is read from disk, so an `include` is an error here.
pub fn load_sources(main: SourceFile, credentials: Option<SourceFile>) -> Loaded {
    load_memory(main, Fragments::Refused, credentials)
}

/// Loads a policy held in memory whose includes are resolved only from
/// `files`: paths relative to the main file's directory, `/`-separated,
/// as [`include_closure`] names them. Nothing is read from disk; an
/// absolute path, one that leaves that directory, or one `files` lacks is
/// an `E0103` at the include.
pub(crate) fn load_sources_with(
    main: SourceFile,
    files: &BTreeMap<String, String>,
    credentials: Option<SourceFile>,
) -> Loaded {
    load_memory(main, Fragments::Memory(files), credentials)
}

fn load_memory(
    main: SourceFile,
    fragments: Fragments<'_>,
    credentials: Option<SourceFile>,
) -> Loaded {
    load_with(main, &fragments, credentials)
}

/// The main file, its includes and the credentials file. An OpenShell
/// policy is imported together with the credentials file, since its
/// `credential_binding`s give that file's entries their hosts; it includes
/// nothing.
fn load_with(
    main: SourceFile,
    fragments: &Fragments<'_>,
    credentials: Option<SourceFile>,
) -> Loaded {
    let mut loaded = Loaded::default();
    if is_yaml(Path::new(main.path())) {
        let imported = import::yaml_with_credentials(&main, credentials.as_ref());
        loaded.diagnostics.extend(imported.policy_diagnostics);
        loaded.diagnostics.extend(imported.credential_diagnostics);
        loaded.sources.push(main);
        loaded.docs.extend(imported.policy);
        loaded.sources.extend(credentials);
        loaded.docs.extend(imported.credentials);
        return loaded;
    }
    load_into(&mut loaded, main, &mut Included::default(), fragments);
    if let Some(cf) = credentials {
        let (doc, diags) = import::credentials_to_document(&cf);
        loaded.diagnostics.extend(diags);
        loaded.sources.push(cf);
        loaded.docs.extend(doc);
    }
    loaded
}

/// Where `include` finds its fragments.
enum Fragments<'a> {
    /// On disk, relative to the including file.
    Disk,
    /// Nowhere: a single file from memory.
    Refused,
    /// In a map the caller sent along, never on disk.
    Memory(&'a BTreeMap<String, String>),
}

/// The file an include names, read only once it is known to be needed.
enum Target<'a> {
    Disk(PathBuf),
    Memory(&'a BTreeMap<String, String>, String),
}

/// Why an include path cannot name a file of an in-memory policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludePathError {
    Absolute,
    Escapes,
}

/// The key of `rel` included from the file keyed `including`: the path
/// relative to the main file's directory, `.` and `..` folded away
/// lexically. Lexical on purpose: these paths name map entries, not files,
/// so no symlink can make them point elsewhere.
pub(crate) fn include_key(including: &str, rel: &str) -> Result<String, IncludePathError> {
    if rel.starts_with('/') || rel.starts_with('\\') {
        return Err(IncludePathError::Absolute);
    }
    let mut parts: Vec<&str> = including.split('/').collect();
    parts.pop();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(IncludePathError::Escapes);
                }
            }
            p => parts.push(p),
        }
    }
    parts.retain(|p| !p.is_empty() && *p != ".");
    Ok(parts.join("/"))
}

/// The fragments `path` includes, directly or through other fragments,
/// keyed as [`load_sources_with`] looks them up, with their text: what a
/// client sends so that a policy held elsewhere compiles as it does here.
/// A fragment that cannot be read or named is left out; compiling says
/// where and why.
pub fn include_closure(path: &Path) -> Result<BTreeMap<String, String>, LoadError> {
    let main = read_source(path)?;
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut files = BTreeMap::new();
    let mut todo: Vec<(String, SourceFile)> = vec![(String::new(), main)];
    while let Some((key, file)) = todo.pop() {
        let (Some(doc), _) = parse_source(&file) else {
            continue;
        };
        for item in &doc.items {
            let Stmt::Include(rel) = &item.stmt.node else {
                continue;
            };
            let Ok(target) = include_key(&key, &rel.node) else {
                continue;
            };
            if files.contains_key(&target) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(dir.join(&target)) else {
                continue;
            };
            files.insert(target.clone(), text.clone());
            todo.push((target.clone(), SourceFile::new(target, text)));
        }
    }
    Ok(files)
}

/// Files met while following includes, by canonical path (each resolved
/// once: a policy with fragments would otherwise resolve every path of the
/// stack again for each include).
#[derive(Default)]
struct Included {
    /// The files being loaded, outermost first.
    stack: Vec<PathBuf>,
    /// Every file loaded so far.
    loaded: Vec<PathBuf>,
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn load_into(loaded: &mut Loaded, file: SourceFile, seen: &mut Included, from: &Fragments<'_>) {
    let (doc, diags) = parse_source(&file);
    loaded.diagnostics.extend(diags);
    loaded.sources.push(file.clone());
    let here = PathBuf::from(file.path());
    let canon = match from {
        Fragments::Disk => canonical(&here),
        Fragments::Refused | Fragments::Memory(_) => here.clone(),
    };
    seen.loaded.push(canon.clone());
    let Some(doc) = doc else { return };
    seen.stack.push(canon);
    let includes_of: Vec<(String, Span)> = doc
        .items
        .iter()
        .filter_map(|i| match &i.stmt.node {
            Stmt::Include(p) => Some((p.node.clone(), p.span)),
            _ => None,
        })
        .collect();
    loaded.docs.push(doc);
    for (rel, span) in includes_of {
        let fail = |message: String, label: &str, help: &str| {
            Diagnostic::new(codes::E0103, &file, span, message)
                .label(label)
                .help(help)
        };
        let (canon, target) = match from {
            Fragments::Refused => {
                loaded.diagnostics.push(fail(
                    format!("cannot include `{rel}`: this policy was not read from disk"),
                    "no fragments here",
                    "submit one self-contained policy: paste the fragment's rules in place of the include",
                ));
                continue;
            }
            Fragments::Disk => {
                let target = here.parent().unwrap_or(Path::new(".")).join(&rel);
                (canonical(&target), Target::Disk(target))
            }
            Fragments::Memory(files) => match include_key(file.path(), &rel) {
                Err(IncludePathError::Absolute) => {
                    loaded.diagnostics.push(fail(
                        format!("cannot include `{rel}`: the path is absolute"),
                        "absolute path",
                        "this policy was not read from disk: include fragments by a path relative to it and send them with it",
                    ));
                    continue;
                }
                Err(IncludePathError::Escapes) => {
                    loaded.diagnostics.push(fail(
                        format!("cannot include `{rel}`: the path leaves the policy's directory"),
                        "outside the policy's directory",
                        "keep fragments in the policy's directory or below it",
                    ));
                    continue;
                }
                Ok(key) => (PathBuf::from(&key), Target::Memory(files, key)),
            },
        };
        let cyclic = seen.stack.contains(&canon);
        if cyclic {
            loaded.diagnostics.push(fail(
                format!("`{rel}` includes itself (directly or through other fragments)"),
                "include cycle",
                "remove one include so the fragments form a tree",
            ));
            continue;
        }
        if seen.loaded.contains(&canon) {
            continue;
        }
        let found = match target {
            Target::Disk(target) => read_source(&target).map_err(|e| {
                fail(
                    format!("cannot include `{rel}`: {e}"),
                    "not readable",
                    "include paths are relative to the including file",
                )
            }),
            Target::Memory(files, key) => match files.get(&key) {
                Some(text) => Ok(SourceFile::new(key, text.clone())),
                None => Err(fail(
                    format!("cannot include `{rel}`: the proposal carries no file `{key}`"),
                    "missing file",
                    "this policy was not read from disk: send every fragment it includes with it",
                )),
            },
        };
        match found {
            Ok(inc) => {
                let before = loaded.docs.len();
                load_into(loaded, inc, seen, from);
                if let Some(d) = loaded.docs.get(before)
                    && d.kind != DocKind::Fragment
                {
                    loaded.diagnostics.push(
                        Diagnostic::new(
                            codes::E0103,
                            &file,
                            span,
                            format!("`{rel}` is a policy, not a fragment"),
                        )
                        .help("only `fragment \"name\" { ... }` files can be included"),
                    );
                }
            }
            Err(d) => loaded.diagnostics.push(d),
        }
    }
    seen.stack.pop();
}

/// The result of checking one policy.
#[derive(Debug, Clone)]
pub struct Checked {
    /// `None` when no document parsed.
    pub resolved: Option<Resolved>,
    /// Sorted by file and position.
    pub diagnostics: Vec<Diagnostic>,
    /// The main file first, for rendering diagnostics and provenance.
    pub sources: Vec<SourceFile>,
    /// The main file is a `fragment`: it checks, but does not compile.
    pub is_fragment: bool,
}

impl Checked {
    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Loads a policy from disk with its includes and resolves and lints it.
pub fn check(path: &Path, credentials: Option<&Path>) -> Result<Checked, LoadError> {
    let loaded = load(path, credentials)?;
    Ok(check_loaded(loaded))
}

/// Resolves and lints; lints run only when there is no error, since
/// their warnings would mostly echo it.
pub fn check_loaded(loaded: Loaded) -> Checked {
    let mut diagnostics = loaded.diagnostics;
    let is_fragment = loaded
        .docs
        .first()
        .is_some_and(|d| d.kind == DocKind::Fragment);
    let resolved = if loaded.docs.is_empty() {
        None
    } else {
        let (resolved, diags) = resolve(&loaded.docs);
        diagnostics.extend(diags);
        // Warnings about a policy that does not resolve would mostly echo
        // its errors; they come once the errors are fixed.
        if !diagnostics.has_errors() {
            diagnostics.extend(lint::lint(&resolved));
            if let Some(d) = loaded
                .docs
                .first()
                .filter(|_| !is_fragment)
                .and_then(|main| lint::no_run_as_user(main, &resolved))
            {
                diagnostics.push(d);
            }
        }
        Some(resolved)
    };
    Checked {
        resolved,
        diagnostics: diagnostics.sorted(),
        sources: loaded.sources,
        is_fragment,
    }
}

/// Check and, when the policy has no errors, compile it.
pub fn compile_file(
    path: &Path,
    credentials: Option<&Path>,
) -> Result<(Checked, Option<Bundle>), LoadError> {
    Ok(compile_checked(check(path, credentials)?))
}

/// Compiles a policy that [`load_sources`] read, exactly as [`compile_file`]
/// compiles one from disk.
pub fn compile_sources(
    main: SourceFile,
    credentials: Option<SourceFile>,
) -> (Checked, Option<Bundle>) {
    compile_checked(check_loaded(load_sources(main, credentials)))
}

/// Compiles a policy that [`load_sources_with`] read, exactly as
/// [`compile_file`] compiles it from disk with its fragments beside it.
pub fn compile_sources_with(
    main: SourceFile,
    files: &BTreeMap<String, String>,
    credentials: Option<SourceFile>,
) -> (Checked, Option<Bundle>) {
    compile_checked(check_loaded(load_sources_with(main, files, credentials)))
}

fn compile_checked(mut checked: Checked) -> (Checked, Option<Bundle>) {
    if checked.is_fragment
        && let Some(first) = checked.sources.first()
    {
        checked.diagnostics.push(
            Diagnostic::new(
                codes::E0105,
                first,
                Span::new(0, 0),
                "a fragment cannot be compiled on its own",
            )
            .help("compile the policy that includes it"),
        );
    }
    let bundle = match (&checked.resolved, checked.has_errors()) {
        (Some(r), false) => Some(compile::compile(&r.policy)),
        _ => None,
    };
    (checked, bundle)
}
