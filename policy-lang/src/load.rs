//! Load a policy from disk: our language or OpenShell YAML (by extension),
//! the fragments it includes, and an optional OpenShell credentials file.
//! Then check (resolve + lint) or compile it.

use std::path::{Path, PathBuf};

use crate::ast::{DocKind, Document, Stmt};
use crate::bundle::Bundle;
use crate::diag::{Diagnostic, Diagnostics, codes};
use crate::resolve::{Resolved, resolve};
use crate::source::{SourceFile, Span};
use crate::{compile, import, lint, parser};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error("cannot read `{path}`: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// True for files this tool reads as OpenShell YAML.
pub fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

pub fn read_source(path: &Path) -> Result<SourceFile, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    Ok(SourceFile::new(path.display().to_string(), text))
}

/// Parse one source file in the format its extension says.
pub fn parse_source(file: &SourceFile) -> (Option<Document>, Diagnostics) {
    if is_yaml(Path::new(file.path())) {
        import::yaml_to_document(file)
    } else {
        parser::parse(file)
    }
}

#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The main document first, then included fragments in include order,
    /// then the credentials file (as a fragment), if any.
    pub docs: Vec<Document>,
    pub sources: Vec<SourceFile>,
    pub diagnostics: Diagnostics,
}

pub fn load(path: &Path, credentials: Option<&Path>) -> Result<Loaded, LoadError> {
    let mut loaded = Loaded::default();
    let main = read_source(path)?;
    let creds = credentials.map(read_source).transpose()?;
    load_into(&mut loaded, main, &mut Included::default(), true);
    if let Some(cf) = creds {
        let (doc, diags) = import::credentials_to_document(&cf);
        loaded.diagnostics.extend(diags);
        loaded.sources.push(cf);
        loaded.docs.extend(doc);
    }
    Ok(loaded)
}

/// Loads a policy held in memory (a gateway's upload, say): one
/// self-contained file and an optional OpenShell credentials file. Nothing
/// is read from disk, so an `include` is an error here.
pub fn load_sources(main: SourceFile, credentials: Option<SourceFile>) -> Loaded {
    let mut loaded = Loaded::default();
    load_into(&mut loaded, main, &mut Included::default(), false);
    if let Some(cf) = credentials {
        let (doc, diags) = import::credentials_to_document(&cf);
        loaded.diagnostics.extend(diags);
        loaded.sources.push(cf);
        loaded.docs.extend(doc);
    }
    loaded
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

/// `includes`: whether `include` reads fragments from disk.
fn load_into(loaded: &mut Loaded, file: SourceFile, seen: &mut Included, includes: bool) {
    let (doc, diags) = parse_source(&file);
    loaded.diagnostics.extend(diags);
    loaded.sources.push(file.clone());
    let here = PathBuf::from(file.path());
    let canon = if includes {
        canonical(&here)
    } else {
        here.clone()
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
    if !includes {
        for (rel, span) in includes_of {
            loaded.diagnostics.push(
                Diagnostic::new(
                    codes::E0103,
                    &file,
                    span,
                    format!("cannot include `{rel}`: this policy was not read from disk"),
                )
                .label("no fragments here")
                .help("submit one self-contained policy: paste the fragment's rules in place of the include"),
            );
        }
        seen.stack.pop();
        return;
    }
    for (rel, span) in includes_of {
        let target = here.parent().unwrap_or(Path::new(".")).join(&rel);
        let canon = canonical(&target);
        let cyclic = seen.stack.contains(&canon);
        if cyclic {
            loaded.diagnostics.push(
                Diagnostic::new(
                    codes::E0103,
                    &file,
                    span,
                    format!("`{rel}` includes itself (directly or through other fragments)"),
                )
                .label("include cycle")
                .help("remove one include so the fragments form a tree"),
            );
            continue;
        }
        if seen.loaded.contains(&canon) {
            continue;
        }
        match read_source(&target) {
            Ok(inc) => {
                let before = loaded.docs.len();
                load_into(loaded, inc, seen, true);
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
            Err(e) => loaded.diagnostics.push(
                Diagnostic::new(
                    codes::E0103,
                    &file,
                    span,
                    format!("cannot include `{rel}`: {e}"),
                )
                .label("not readable")
                .help("include paths are relative to the including file"),
            ),
        }
    }
    seen.stack.pop();
}

/// The result of checking one policy.
#[derive(Debug, Clone)]
pub struct Checked {
    pub resolved: Option<Resolved>,
    pub diagnostics: Vec<Diagnostic>,
    pub sources: Vec<SourceFile>,
    pub is_fragment: bool,
}

impl Checked {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

pub fn check(path: &Path, credentials: Option<&Path>) -> Result<Checked, LoadError> {
    let loaded = load(path, credentials)?;
    Ok(check_loaded(loaded))
}

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
