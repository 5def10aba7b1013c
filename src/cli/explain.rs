use crate::output::out;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use policy_bundle::{
    ADVISOR_ADDR, ADVISOR_HOST, ADVISOR_PORT, Dest, Injection, Origin, SecretSource,
};
use policy_bundle::{ArgCondition, ArgOp, Bundle, BundleError, L7Matcher, RightsAtAbi, Via};
use policy_lang::source::SourceFile;
use policy_lang::{load, parser};

use super::{EXIT_OK, input_error};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A compiled bundle.
    #[arg(value_name = "BUNDLE")]
    bundle: PathBuf,
}

pub fn run(args: &Args) -> u8 {
    let bytes = match std::fs::read(&args.bundle) {
        Ok(b) => b,
        Err(e) => return input_error(&format!("cannot read `{}`: {e}", args.bundle.display())),
    };
    match Bundle::from_slice(&bytes) {
        Ok(b) => {
            out!("{}", explain(&b));
            EXIT_OK
        }
        Err(BundleError::Json(_)) if is_policy_source(&args.bundle, &bytes) => {
            input_error(&format!(
                "`{0}` is a policy source, not a compiled bundle; compile it first: \
                 `openshell-policy compile {0} -o bundle.json`, then `openshell-policy explain bundle.json`",
                args.bundle.display()
            ))
        }
        Err(e) => input_error(&format!("`{}`: {e}", args.bundle.display())),
    }
}

/// True when a file that is not a bundle is a policy `compile` reads: a
/// `.policy` or OpenShell `.yaml`/`.yml` file, or text that parses as a
/// policy whatever its name.
fn is_policy_source(path: &Path, bytes: &[u8]) -> bool {
    if load::is_yaml(path) || path.extension().is_some_and(|e| e == "policy") {
        return true;
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let file = SourceFile::new(path.display().to_string(), text);
    parser::parse(&file).0.is_some()
}

fn words(access: &[RightsAtAbi]) -> String {
    let has = |r: &str| access.iter().any(|a| a.rights.iter().any(|x| x == r));
    let mut w = Vec::new();
    if has("read_file") {
        w.push("read");
    }
    if has("write_file") {
        w.push("write");
    }
    if has("execute") {
        w.push("exec");
    }
    let by_abi: Vec<String> = access
        .iter()
        .filter(|a| a.abi > 1)
        .map(|a| format!("{} from ABI {}", a.rights.join(" "), a.abi))
        .collect();
    if by_abi.is_empty() {
        w.join(" ")
    } else {
        format!("{}  ({})", w.join(" "), by_abi.join("; "))
    }
}

fn origin(o: Option<&Origin>) -> String {
    o.map(|o| format!("  [{}:{}]", o.file, o.line))
        .unwrap_or_default()
}

fn dest(d: &Dest) -> String {
    match d {
        Dest::Host(h) => h.to_string(),
        Dest::Addrs(a) => a
            .nets()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

fn rule(m: &L7Matcher) -> String {
    let mut s = format!("{} {}", m.methods, m.path);
    for q in &m.query {
        let alts: Vec<String> = q.any.iter().map(ToString::to_string).collect();
        let _ = write!(s, " ?{}={}", q.key, alts.join("|"));
    }
    s
}

fn conditions(when: &[ArgCondition]) -> String {
    when.iter()
        .map(|c| match c.op {
            ArgOp::MaskedEq(mask) if mask == c.value => format!("arg{} has {:#x}", c.arg, c.value),
            ArgOp::MaskedEq(_) => format!("arg{} = {}", c.arg, c.value),
            ArgOp::Ne => format!("arg{} != {}", c.arg, c.value),
            ArgOp::Ge => format!("arg{} >= {}", c.arg, c.value),
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

pub fn explain(b: &Bundle) -> String {
    let t = &b.enforcement;
    let p = &b.provenance;
    let mut o = String::new();
    let _ = writeln!(o, "bundle {} (format {})", b.digest, b.format_version);
    let _ = writeln!(o, "policy \"{}\" from {}", p.policy, p.files.join(", "));
    let _ = writeln!(o);
    let ll = &t.landlock;
    let mode = match ll.mode {
        policy_bundle::LandlockMode::Hard => "hard",
        policy_bundle::LandlockMode::BestEffort => "best effort",
    };
    let _ = writeln!(o, "1. Landlock ({mode}, minimum ABI {})", ll.min_abi);
    let width = ll
        .paths
        .iter()
        .map(|x| x.path.len())
        .max()
        .unwrap_or(0)
        .max(7);
    for (i, lp) in ll.paths.iter().enumerate() {
        let _ = writeln!(
            o,
            "   {:width$}  {}{}",
            lp.path,
            words(&lp.access),
            origin(p.fs.get(i))
        );
    }
    if let Some(w) = &ll.workdir {
        let _ = writeln!(o, "   {:width$}  {}", "workdir", words(w));
    }
    if ll.paths.is_empty() && ll.workdir.is_none() {
        let _ = writeln!(o, "   no filesystem access at all");
    }
    let _ = writeln!(
        o,
        "   TCP connect ports (ABI 4+): {}; binding: none",
        ll.tcp_connect_ports
    );
    let _ = writeln!(o, "   scoped (ABI 6+): {}", ll.scoped.join(", "));
    match (&t.process.user, &t.process.group) {
        (None, None) => {
            let _ = writeln!(o, "   run as: the supervisor's choice");
        }
        (u, g) => {
            let _ = writeln!(
                o,
                "   run as: user {} group {}",
                u.as_deref().unwrap_or("-"),
                g.as_deref().unwrap_or("-")
            );
        }
    }
    let _ = writeln!(o);
    let sc = &t.seccomp;
    let _ = writeln!(o, "2. Seccomp");
    let mut by_errno: std::collections::BTreeMap<&str, Vec<String>> =
        std::collections::BTreeMap::new();
    for d in &sc.deny {
        let text = if d.when.is_empty() {
            d.syscall.clone()
        } else {
            format!("{} when {}", d.syscall, conditions(&d.when))
        };
        by_errno.entry(d.errno.as_str()).or_default().push(text);
    }
    for (errno, calls) in by_errno {
        let _ = writeln!(o, "   denied with {errno}: {}", calls.join(", "));
    }
    let trapped: Vec<String> = sc
        .notify
        .iter()
        .map(|t| {
            if t.when.is_empty() {
                t.syscall.clone()
            } else {
                format!("{} when {}", t.syscall, conditions(&t.when))
            }
        })
        .collect();
    let _ = writeln!(o, "   answered by the supervisor: {}", trapped.join(", "));
    if sc.identities.is_empty() {
        let _ = writeln!(o, "   no binary may open a network connection");
    }
    for id in &sc.identities {
        let pin = id
            .binary
            .sha256
            .as_deref()
            .map(|h| format!(" (sha256:{h})"))
            .unwrap_or_default();
        let _ = writeln!(o, "   {}{pin}", id.binary.glob);
        for r in &id.routes {
            let Some(route) = sc.routes.get(*r as usize) else {
                continue;
            };
            let via = match route.via {
                Via::L4 => "L4".to_string(),
                Via::Tcp => "transparent tcp".to_string(),
                Via::Uninspected => "http, not inspected (tls skip)".to_string(),
                Via::L7(e) => format!("L7 endpoint #{e}"),
            };
            let via = match route.credential_guard(&t.credentials) {
                Some(c) => format!(
                    "{via}; REFUSED: credential `{}` is bound to this host (uninspected_credentials not given)",
                    c.name
                ),
                None => via,
            };
            let via = if route.websocket_credential_rewrite {
                format!(
                    "{via}; placeholders in client text messages replaced (websocket_credential_rewrite)"
                )
            } else {
                via
            };
            let via = if route.request_body_credential_rewrite {
                format!(
                    "{via}; placeholders in request bodies replaced (request_body_credential_rewrite)"
                )
            } else {
                via
            };
            let addrs = route
                .addresses
                .as_ref()
                .map(|a| {
                    format!(
                        " addresses {}",
                        a.nets()
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "     -> {}:{}{addrs}  via {via}{}",
                dest(&route.dest),
                route.ports,
                origin(p.routes.get(*r as usize).and_then(|v| v.first()))
            );
        }
        if !id.dns.is_empty() {
            let names: Vec<String> = id.dns.iter().map(ToString::to_string).collect();
            let _ = writeln!(o, "     dns: {}", names.join(" "));
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "3. L7 rules");
    if t.l7.is_empty() {
        let _ = writeln!(o, "   no inspected endpoints");
    }
    for (i, ep) in t.l7.iter().enumerate() {
        let mode = match ep.enforcement {
            policy_bundle::Enforcement::Enforce => "enforce",
            policy_bundle::Enforcement::Audit => "audit",
        };
        let path = ep
            .path
            .as_ref()
            .map(|p| format!(", path {p}"))
            .unwrap_or_default();
        let slash = if ep.encoded_slash {
            ", %2F allowed"
        } else {
            ""
        };
        let fold = if ep.fold_paths {
            ", paths fold case and a trailing /"
        } else {
            ""
        };
        let _ = writeln!(o, "   #{i} {mode}{path}{slash}{fold}");
        for m in ep.allow() {
            let _ = writeln!(o, "      allow {}{}", rule(m), origin(m.origins.first()));
        }
        for m in ep.deny() {
            let _ = writeln!(o, "      deny  {}{}", rule(m), origin(m.origins.first()));
        }
        if ep.allow().is_empty() {
            let _ = writeln!(o, "      (no allow rules: every request is refused)");
        }
    }
    if !t.credentials.is_empty() || !t.secrets.is_empty() {
        let _ = writeln!(o);
        let _ = writeln!(o, "Credentials");
    }
    for (i, c) in t.credentials.iter().enumerate() {
        let src = match &c.source {
            SecretSource::Env(v) => format!("env {v}"),
            SecretSource::File(f) => format!("file {f}"),
        };
        let inject = match &c.inject {
            Injection::Header { name, template } => format!("sets header {name}: {template}"),
            Injection::Replace => format!(
                "replaces the placeholder in {}",
                c.placeholder.as_deref().unwrap_or("-")
            ),
        };
        let hosts: Vec<String> = c.hosts.iter().map(ToString::to_string).collect();
        let methods = c
            .methods
            .as_ref()
            .map(|m| format!(" methods {m}"))
            .unwrap_or_default();
        let paths = c
            .paths
            .as_ref()
            .map(|ps| {
                format!(
                    " paths {}",
                    ps.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "   {} (supervisor reads {src}; {inject}) hosts {}{methods}{paths}{}",
            c.name,
            hosts.join(" "),
            origin(p.credentials.get(i))
        );
    }
    for (i, s) in t.secrets.iter().enumerate() {
        let src = match &s.source {
            SecretSource::Env(v) => format!("env {v}"),
            SecretSource::File(f) => format!("file {f}"),
        };
        let hosts: Vec<String> = s.hosts.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            o,
            "   {} held inside the sandbox ({src}) unlocks {}{}",
            s.name,
            hosts.join(" "),
            origin(p.secrets.get(i))
        );
    }
    if let Some(a) = &t.advisor {
        let _ = writeln!(o);
        let _ = writeln!(o, "Advisor endpoint");
        let who: Vec<String> = a
            .binaries
            .iter()
            .map(|b| match &b.sha256 {
                Some(h) => format!("{} (sha256:{h})", b.glob),
                None => b.glob.to_string(),
            })
            .collect();
        let _ = writeln!(
            o,
            "   http://{ADVISOR_HOST}/ ({ADVISOR_ADDR}:{ADVISOR_PORT}, answered by the supervisor, never forwarded) for {}{}",
            who.join(" "),
            origin(p.advisor.as_ref())
        );
        let _ = writeln!(
            o,
            "   GET /denials: this sandbox's recent denials; POST /proposals: a change asked of the gateway, approved only by a person"
        );
    }
    o
}
