//! Hot reload of a bundle's network part: `SIGHUP`, or `--watch` on the
//! bundle file.
//!
//! A reload reads and verifies the bundle exactly as a launch does
//! (format version, digest). A bundle that fails is refused with one log
//! line and the policy in force stays. One that passes replaces, at once
//! and together, the connect decisions (routes, binaries), the L7 rules,
//! the DNS names and the credentials (secrets are read again; placeholders
//! stay those the workload has). Then every open proxied connection is
//! decided again, and those the new policy denies are closed. The same
//! bundle loaded again has its secrets read again and nothing else.
//!
//! What cannot change is what the workload applied to itself before its
//! `exec`: the Landlock ruleset, the seccomp filter, the user, the
//! environment. A new bundle that differs there is still applied for its
//! network part, and a note says the rest waits for the next launch.
//!
//! A bundle the workload can change is never reloaded: it would rewrite
//! its own routes and recompute the digest. `--watch` refuses to start on
//! such a bundle; a `SIGHUP` reload checks again and refuses. The exact
//! binary paths are resolved again in the workload's filesystem
//! ([`crate::broker::aliases`]).

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use policy_bundle::Tables;
use tokio::signal::unix::{SignalKind, signal};

use crate::broker::aliases::{Aliases, named_binaries};
use crate::credentials::Placeholders;
use crate::denylog::DenyLog;
use crate::dns::DnsPolicy;
use crate::l7::Proxy;
use crate::notes::note;
use crate::policy::{Active, Policy, Swap};
use crate::tables;
use sandbox::writable::Writable;

/// How often `--watch` looks at the bundle file.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(250);

/// Everything a reload replaces.
#[derive(Debug)]
pub struct Reloader {
    pub path: PathBuf,
    pub policy: Arc<Policy>,
    pub dns: Arc<Swap<DnsPolicy>>,
    pub placeholders: Arc<Placeholders>,
    pub log: Arc<DenyLog>,
    pub proxy: Option<Arc<Proxy>>,
    /// What the workload can write, and its root (for binary links).
    guard: Option<(Arc<Writable>, Arc<File>)>,
    /// The binary links a standalone sandbox reported, for a supervisor
    /// that cannot see the workload's filesystem.
    reported: std::sync::Mutex<Vec<(String, String)>>,
    generation: AtomicU64,
    busy: tokio::sync::Mutex<()>,
}

/// What happened to a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// In force; `fixed` names what waits for the next launch (Landlock,
    /// syscall filter, user), if anything.
    Applied {
        digest: String,
        closed: usize,
        fixed: Option<String>,
    },
    Unchanged,
    /// The same bundle, loaded again by `SIGHUP` or `--watch`: its
    /// credentials' secrets were read again (a rotated token is in use
    /// from the next request), nothing else changed.
    SecretsReread,
    Refused(String),
}

impl Reloader {
    #[must_use]
    pub fn new(
        path: PathBuf,
        policy: Arc<Policy>,
        dns: Arc<Swap<DnsPolicy>>,
        placeholders: Arc<Placeholders>,
        log: Arc<DenyLog>,
        proxy: Option<Arc<Proxy>>,
    ) -> Self {
        Self {
            path,
            policy,
            dns,
            placeholders,
            log,
            proxy,
            guard: None,
            reported: std::sync::Mutex::default(),
            generation: AtomicU64::new(0),
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// Refuses reloads while the workload can change the bundle, and
    /// resolves binary links in the filesystem under `root`.
    #[must_use]
    pub fn guarded(mut self, writable: Arc<Writable>, root: Arc<File>) -> Self {
        self.guard = Some((writable, root));
        self
    }

    /// Puts in force the binary links a standalone sandbox reported in its
    /// Evidence ([`sandbox::links`]), for the bundle in force and every
    /// reload after (a name a reload adds is not resolved: its rules apply
    /// to that exact path).
    pub async fn use_links(&self, links: Vec<(String, String)>) {
        let _one_at_a_time = self.busy.lock().await;
        if let Ok(mut reported) = self.reported.lock() {
            *reported = links;
        }
        let old = self.policy.current();
        let aliases = self.reported_aliases(old.bundle());
        let bundle = old.bundle().clone();
        let placeholders = Arc::clone(&self.placeholders);
        let generation = old.generation;
        let built = tokio::task::spawn_blocking(move || {
            Active::new(bundle, &placeholders, generation).with_aliases(aliases)
        })
        .await;
        if let Ok(active) = built {
            self.policy.replace(active);
        }
    }

    /// The reported links of the binaries `bundle` names.
    fn reported_aliases(&self, bundle: &policy_bundle::Bundle) -> Aliases {
        let names = named_binaries(&bundle.enforcement.seccomp.identities);
        let reported = self.reported.lock().map(|r| r.clone()).unwrap_or_default();
        Aliases::from_links(
            reported
                .into_iter()
                .filter(|(name, _)| names.iter().any(|n| &n.path == name)),
        )
    }

    /// Loads the bundle file again and puts its network part in force.
    pub async fn reload(&self) -> Outcome {
        let _one_at_a_time = self.busy.lock().await;
        let shown = self.path.display().to_string();
        let path = self.path.clone();
        let writable = self.guard.as_ref().map(|(w, _)| Arc::clone(w));
        let exposed = tokio::task::spawn_blocking(move || writable?.exposure(&path)).await;
        match exposed {
            Ok(None) => {}
            Ok(Some(why)) => {
                let why = format!(
                    "reload refused, the policy in force stays: the workload can change the bundle ({why})"
                );
                return self.refused(&shown, why);
            }
            Err(e) => return self.refused(&shown, format!("reload failed: {e}")),
        }
        let path = self.path.clone();
        let loaded = tokio::task::spawn_blocking(move || tables::load_bundle(&path)).await;
        let bundle = match loaded {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                let why = format!(
                    "reload refused, the policy in force stays: {}",
                    error_chain(&e)
                );
                return self.refused(&shown, why);
            }
            Err(e) => return self.refused(&shown, format!("reload failed: {e}")),
        };
        if bundle.digest == self.policy.current().bundle().digest {
            return self.reread_secrets(bundle, &shown).await;
        }
        self.apply_locked(bundle, &shown).await
    }

    /// Puts in force the bundle in force with its secrets read again: an
    /// operator who rotated a token file sends `SIGHUP` and expects the
    /// new one, whether or not the policy changed. The decisions are the
    /// same, so the generation stays and no connection is decided again.
    async fn reread_secrets(&self, bundle: policy_bundle::Bundle, shown: &str) -> Outcome {
        let old = self.policy.current();
        let placeholders = Arc::clone(&self.placeholders);
        let (generation, aliases) = (old.generation, old.aliases.clone());
        let built = tokio::task::spawn_blocking(move || {
            Active::new(bundle, &placeholders, generation).with_aliases(aliases)
        })
        .await;
        let Ok(active) = built else {
            return self.refused(shown, "reload failed while reading the secrets".into());
        };
        self.note_missing_secrets(&active);
        let digest = active.bundle().digest.clone();
        self.policy.replace(active);
        let message =
            format!("bundle unchanged ({digest}): the credentials' secrets were read again");
        note(&message);
        self.log.reload(true, shown, Some(&digest), &message);
        Outcome::SecretsReread
    }

    /// A note for each credential whose secret could not be read.
    fn note_missing_secrets(&self, active: &Active) {
        for cred in active.credentials.iter() {
            if let Err(why) = &cred.secret {
                note(&format!(
                    "credential `{}`: {why}; requests that need it are refused",
                    cred.name
                ));
            }
        }
    }

    /// Puts the network part of a verified `bundle` in force (the
    /// gateway's, see [`crate::gateway`]); `shown` names where it came from.
    pub async fn apply(&self, bundle: policy_bundle::Bundle, shown: &str) -> Outcome {
        let _one_at_a_time = self.busy.lock().await;
        self.apply_locked(bundle, shown).await
    }

    async fn apply_locked(&self, bundle: policy_bundle::Bundle, shown: &str) -> Outcome {
        let old = self.policy.current();
        if bundle.digest == old.bundle().digest {
            return Outcome::Unchanged;
        }
        let fixed = fixed_parts_differ(&old.bundle().enforcement, &bundle.enforcement);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let digest = bundle.digest.clone();
        let name = bundle.provenance.policy.clone();
        let placeholders = Arc::clone(&self.placeholders);
        let guard = self
            .guard
            .as_ref()
            .map(|(w, r)| (Arc::clone(w), root_path(r)));
        let reported = self.reported_aliases(&bundle);
        let built = tokio::task::spawn_blocking(move || {
            let dns = DnsPolicy::from_tables(&bundle.enforcement);
            let (aliases, expanded) = guard.map_or_else(
                || (reported, Vec::new()),
                |(w, r)| Aliases::expand(&bundle.enforcement.seccomp.identities, &r, Some(&w)),
            );
            let active = Active::new(bundle, &placeholders, generation).with_aliases(aliases);
            (active, dns, expanded)
        })
        .await;
        let Ok((active, dns, expanded)) = built else {
            return self.refused(shown, "reload failed while building the new policy".into());
        };
        for line in expanded {
            note(&line);
        }
        self.note_missing_secrets(&active);
        self.policy.replace(active);
        self.dns.replace(dns);
        self.log.set_policy(&name, &digest);
        let closed = self.proxy.as_ref().map_or(0, |p| p.revalidate());
        let mut message = format!(
            "bundle reloaded ({digest}): network, L7 and credential rules in force; {closed} open connection(s) closed"
        );
        if let Some(parts) = &fixed {
            message.push_str(&format!(
                "; the new {parts} cannot change in a running sandbox and apply from the next launch"
            ));
        }
        note(&message);
        self.log.reload(true, shown, Some(&digest), &message);
        Outcome::Applied {
            digest,
            closed,
            fixed,
        }
    }

    /// Records a refusal (a note and a deny-log line); the policy in force
    /// stays.
    pub fn refused(&self, shown: &str, why: String) -> Outcome {
        note(&why);
        self.log.reload(false, shown, None, &why);
        Outcome::Refused(why)
    }

    /// Reloads on every `SIGHUP` (registered now, so a signal from here on
    /// never takes its default action) and, with `watch`, whenever the
    /// bundle file changes.
    pub fn spawn(self: &Arc<Self>, watch: bool) -> std::io::Result<()> {
        let mut hup = signal(SignalKind::hangup())?;
        let me = Arc::clone(self);
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                me.reload().await;
            }
        });
        if watch {
            let me = Arc::clone(self);
            tokio::spawn(async move {
                let mut seen = stamp(&me.path);
                loop {
                    tokio::time::sleep(WATCH_INTERVAL).await;
                    let now = stamp(&me.path);
                    if now != seen && now.is_some() {
                        seen = now;
                        me.reload().await;
                    }
                }
            });
        }
        Ok(())
    }
}

/// A path through which `root`, a directory held open, is reached.
#[must_use]
pub fn root_path(root: &File) -> PathBuf {
    use std::os::fd::AsRawFd as _;
    PathBuf::from(format!("/proc/self/fd/{}", root.as_raw_fd()))
}

/// What identifies a version of the file: inode, size, modification time.
fn stamp(path: &std::path::Path) -> Option<(u64, u64, SystemTime)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.len(), m.modified().ok()?))
}

/// Which parts applied before `exec` differ, in words.
fn fixed_parts_differ(old: &Tables, new: &Tables) -> Option<String> {
    let mut parts = Vec::new();
    let (o, n) = (&old.landlock, &new.landlock);
    // One Landlock ruleset carries files and TCP ports; a port opened by a
    // new route is not a change of file rights, and is not called one.
    if o.paths != n.paths || o.workdir != n.workdir {
        parts.push("filesystem (Landlock) rules");
    }
    if o.tcp_connect_ports != n.tcp_connect_ports {
        parts.push("Landlock TCP port rules");
    }
    if o.scoped != n.scoped {
        parts.push("Landlock IPC scoping");
    }
    if o.mode != n.mode || o.min_abi != n.min_abi {
        parts.push("Landlock mode or minimum ABI");
    }
    if old.process != new.process {
        parts.push("run_as user");
    }
    if old.seccomp.deny != new.seccomp.deny || old.seccomp.notify != new.seccomp.notify {
        parts.push("syscall filter");
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables(body: &str) -> Tables {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.policy");
        std::fs::write(&path, format!("policy \"p\" {{\n{body}}}\n")).unwrap();
        let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
        bundle.ok_or(checked.diagnostics).unwrap().enforcement
    }

    const BASE: &str = "  landlock hard min_abi 4\n  fs exec /usr\n  binaries b = /usr/bin/curl\n";

    #[test]
    fn each_fixed_part_is_named_for_what_differs() {
        let one = tables(&format!("{BASE}  allow b -> a.test:443\n"));
        let port = tables(&format!("{BASE}  allow b -> a.test:8443\n"));
        let host = tables(&format!("{BASE}  allow b -> other.test:443\n"));
        let files = tables(&format!("{BASE}  fs read /etc\n  allow b -> a.test:443\n"));
        let abi = tables(&format!(
            "{}  allow b -> a.test:443\n",
            BASE.replace("min_abi 4", "min_abi 5")
        ));
        assert_eq!(fixed_parts_differ(&one, &host), None, "a new host only");
        assert_eq!(
            fixed_parts_differ(&one, &port).as_deref(),
            Some("Landlock TCP port rules"),
            "a port is not a filesystem rule"
        );
        assert_eq!(
            fixed_parts_differ(&one, &files).as_deref(),
            Some("filesystem (Landlock) rules")
        );
        assert_eq!(
            fixed_parts_differ(&one, &abi).as_deref(),
            Some("Landlock mode or minimum ABI")
        );
        let both = tables(&format!("{BASE}  fs read /etc\n  allow b -> a.test:8443\n"));
        assert_eq!(
            fixed_parts_differ(&one, &both).as_deref(),
            Some("filesystem (Landlock) rules, Landlock TCP port rules")
        );
    }
}
