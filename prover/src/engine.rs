//! Putting it together: domains from both bundles, models, queries, the
//! region search, witnesses replayed through the reference evaluator,
//! blame, and accepted risks.

use std::time::{Duration, Instant};

use policy_bundle::Bundle;
use policy_bundle::eval::Evaluator;
use policy_bundle::matcher::BinaryGlob;
use serde::Serialize;

use crate::accepted::{Acceptance, DestScope, today};
use crate::domain::{self, Domain, Extra};
use crate::error::ProverError;
use crate::finding::{self, Finding, Loc, Witness};
use crate::formula::{Defs, F, Lit, Point, and, ids, lit};
use crate::model::{self, BinaryFacts, Model};
use crate::query::{self, Category, Query, Variant};
use crate::rebound::{self, CredentialChange};
use crate::region::Region;
use crate::registry::Registry;
use crate::sandbox::Sandbox;
use crate::solve::{Outcome, Search};
use crate::solver::LazySmt;
use crate::timing::Timings;
use crate::weakened::{self, SandboxChange};
use crate::websocket::Probe;
use crate::witness::{self, Observed};

/// How a proof runs: budgets, the binary registry, accepted risks. The
/// command line overrides the defaults field by field.
#[derive(Debug, Clone)]
pub struct Options {
    /// Budget for all solver calls together; the whole proof stops within
    /// `solver::GRACE` of it and answers `inconclusive` (a gateway's
    /// timeout is a promise to stop, not only to stop asking Z3).
    pub timeout_ms: u64,
    /// What each binary can do (speak HTTP, bypass L7, exfiltrate), which
    /// the categories read.
    pub registry: Registry,
    /// Risks accepted beforehand: matching findings are reported suppressed.
    pub accepted: Vec<Acceptance>,
    /// Regions reported in detail per query; beyond, they are counted.
    pub max_findings: usize,
    /// Regions counted per query before giving up counting.
    pub max_regions: usize,
    /// Keep the SMT-LIB text of the questions in `Report::smt`.
    pub print_smt: bool,
    /// Steps the witness search may take per string signature; an atom it
    /// gives up on is kept without a witness (see `strings::search`).
    pub string_search_budget: usize,
    /// Record where the time goes (`Stats::phases`).
    pub timings: bool,
    /// Prove a diff over what its changed rules can reach (`slice`);
    /// off, the whole bundles are modelled. The answer is the same
    /// either way; the tests compare the two.
    pub slice: bool,
    /// The SMT solver for what the finite-domain search cannot settle
    /// (`prover_z3::Z3`). Without one, a proof that needs it fails with
    /// [`ProverError::SolverNeeded`]: a program that can hand the proof to
    /// one elsewhere need not link it.
    pub solver: Option<&'static dyn crate::solver::Backend>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout_ms: 10_000,
            registry: Registry::embedded(),
            accepted: Vec::new(),
            max_findings: 20,
            max_regions: 200,
            print_smt: false,
            string_search_budget: crate::strings::search::BUDGET,
            timings: false,
            slice: true,
            solver: None,
        }
    }
}

/// The answer of a proof; its kebab-case word is part of the JSON report
/// and decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The candidate adds nothing: no request, binary or right it allows
    /// that the old revision did not.
    NoNewAccess,
    /// No new credentialed access, but new uncredentialed reach, a new
    /// filesystem right or weaker enforcement (the report's `reach` and
    /// `sandbox`). Exits 0 like `no-new-access`: only credentialed access
    /// blocks a change, but nothing may treat it as "adds nothing".
    NewReach,
    /// Some finding not accepted as a risk: the change is blocked.
    Widened,
    /// A question was left undecided (time, a budget, an atom without a
    /// witness) and no widening was shown: nothing is claimed either way.
    Inconclusive,
    /// Containment: everything the candidate allows, the boundary allows.
    Within,
    /// Containment: the candidate allows something the boundary does not
    /// (each excess with its witness).
    Exceeds,
    /// Containment: no excess was found, but the candidate or the boundary
    /// has something the prover cannot compare (the report's
    /// `unsupported` says what): nothing is claimed.
    Unsupported,
}

/// Regions found but not detailed.
#[derive(Debug, Clone, Serialize)]
pub struct Omitted {
    pub category: Category,
    pub count: usize,
    /// Counting stopped at the cap: there may be more.
    pub at_least: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub binary_atoms: usize,
    pub host_atoms: usize,
    pub path_atoms: usize,
    pub definitions: usize,
    pub millis: u128,
    /// With `Options::timings`: one line per phase, in order.
    #[serde(skip)]
    pub phases: Vec<String>,
}

/// What a proof found; `to_json` is the form the JSON output and the
/// gateway use.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The summary the exit code follows.
    pub verdict: Verdict,
    /// What blocks the change: new credentialed access and the risk
    /// categories.
    pub findings: Vec<Finding>,
    /// New uncredentialed network reach (`reach_expansion`), with
    /// witnesses like findings; it does not block.
    pub reach: Vec<Finding>,
    /// New filesystem rights and weaker sandbox enforcement.
    pub sandbox: Vec<SandboxChange>,
    /// Credentials that send another secret, or put it elsewhere, than
    /// before (`credential_changed`). They block like `findings`, but have
    /// no witness request: the requests are the same, what they carry is
    /// not.
    pub credentials: Vec<CredentialChange>,
    /// Whether either policy declares a credential or secret: without one
    /// the credentialed question is vacuous and only `reach` tells what
    /// changed.
    pub credentials_declared: bool,
    /// Regions counted per category beyond `Options::max_findings`.
    pub omitted: Vec<Omitted>,
    /// Why the verdict is inconclusive, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<String>,
    /// Caveats for people: what the proof assumed or left out.
    pub notes: Vec<String>,
    /// The questions as SMT-LIB, with `Options::print_smt`.
    #[serde(skip)]
    pub smt: Option<String>,
    /// Sizes and time, for tuning; not part of the verdict.
    pub stats: Stats,
    /// Whether this answers containment (`within`) rather than a diff:
    /// then every finding, sandbox change and credential blocks.
    #[serde(skip)]
    pub containment: bool,
    /// Containment: what the prover cannot compare, one sentence each.
    pub unsupported: Vec<String>,
}

impl Verdict {
    /// The verdict's word in reports: `no-new-access`, `widened`,
    /// `inconclusive`.
    #[must_use]
    pub fn word(self) -> &'static str {
        match self {
            Verdict::NoNewAccess => "no-new-access",
            Verdict::NewReach => "new-reach",
            Verdict::Widened => "widened",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Within => "within",
            Verdict::Exceeds => "exceeds",
            Verdict::Unsupported => "unsupported",
        }
    }
}

impl Report {
    /// The report as `diff --prove --format json` prints it.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        if self.containment {
            // Every excess blocks: request-level ones are all `findings`,
            // whatever their credential.
            return serde_json::json!({
                "question": "within",
                "verdict": self.verdict.word(),
                "findings": self.findings,
                "sandbox": self.sandbox,
                "unsupported": self.unsupported,
                "credentials_declared": self.credentials_declared,
                "omitted": self.omitted,
                "inconclusive": self.inconclusive,
                "notes": self.notes,
                "stats": self.stats,
            });
        }
        serde_json::json!({
            "verdict": self.verdict.word(),
            "findings": self.findings,
            "reach": self.reach,
            "sandbox": self.sandbox,
            "credentials": self.credentials,
            "credentials_declared": self.credentials_declared,
            "omitted": self.omitted,
            "inconclusive": self.inconclusive,
            "notes": self.notes,
            "stats": self.stats,
        })
    }
}

struct Side<'a> {
    bundle: &'a Bundle,
    /// The caller's, when it handed the bundle over ([`diff_owned`]).
    given: Option<&'a Evaluator>,
    /// Else built on first use: only a finding is replayed through it,
    /// and a diff without one should not pay for copying and indexing the
    /// bundle.
    evaluator: std::cell::OnceCell<Evaluator>,
    model: Model,
}

impl Side<'_> {
    fn eval(&self) -> &Evaluator {
        match self.given {
            Some(e) => e,
            None => self
                .evaluator
                .get_or_init(|| Evaluator::new(self.bundle.clone())),
        }
    }
}

/// Evaluators the caller built from bundles it handed over.
#[derive(Clone, Copy, Default)]
struct Given<'a> {
    new: Option<&'a Evaluator>,
    old: Option<&'a Evaluator>,
}

fn extra(bundles: &[&Bundle], opts: &Options) -> Extra {
    let mut e = Extra::default();
    for path in opts.registry.binaries.keys() {
        if let Ok(g) = BinaryGlob::parse(&escape_glob(path)) {
            e.binaries.push(g);
        }
    }
    for b in bundles {
        let s = Sandbox::of(b);
        e.binaries
            .extend(s.write_trees().into_iter().map(|(_, g)| g));
        e.binaries
            .extend(s.exec_trees().into_iter().map(|(_, g)| g));
    }
    for a in &opts.accepted {
        e.binaries.extend(a.binary.clone());
        match &a.dest {
            Some(DestScope::Hosts(h)) => e.hosts.extend(h.iter().cloned()),
            Some(DestScope::Addrs(s)) => e.addrs.push(s.clone()),
            None => {}
        }
        e.ports.extend(a.ports.clone());
        e.methods.extend(a.methods.iter().flatten().cloned());
        e.paths.extend(a.paths.iter().flatten().cloned());
    }
    e
}

fn escape_glob(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn binary_facts(dom: &Domain, reg: &Registry) -> BinaryFacts {
    let mut f = BinaryFacts::default();
    for (i, a) in dom.bins.atoms.iter().enumerate() {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        let facts = if a.exact
            && let Some(w) = &a.witness
        {
            reg.facts(w)
        } else {
            crate::registry::Facts::unknown()
        };
        if facts.bypasses_l7() {
            f.bypass.push(i);
        }
        if facts.can_exfiltrate {
            f.exfil.push(i);
        }
    }
    f
}

/// `diff --prove`: what `new` allows with a credential that `old` did not.
pub fn diff(old: &Bundle, new: &Bundle, opts: &Options) -> Result<Report, ProverError> {
    diff_given(old, new, opts, Given::default())
}

/// [`diff`] of bundles the caller has no further use for: the evaluators
/// that replay witnesses take them as they are, where `diff` copies both
/// bundles when a finding is replayed (5 ms of a 150 ms diff of 3,000
/// endpoints, more than indexing them costs when nothing is replayed).
pub fn diff_owned(old: Bundle, new: Bundle, opts: &Options) -> Result<Report, ProverError> {
    if !opts.print_smt && old.digest == new.digest && old.enforcement == new.enforcement {
        return Ok(identical(opts, declares_credentials(&new)));
    }
    let (old, new) = (Evaluator::new(old), Evaluator::new(new));
    let given = Given {
        new: Some(&new),
        old: Some(&old),
    };
    diff_given(old.bundle(), new.bundle(), opts, given)
}

fn diff_given(
    old: &Bundle,
    new: &Bundle,
    opts: &Options,
    given: Given<'_>,
) -> Result<Report, ProverError> {
    if !opts.print_smt && old.digest == new.digest && old.enforcement == new.enforcement {
        return Ok(identical(opts, declares_credentials(new)));
    }
    let mut report = run(Some(old), new, opts, Mode::Diff, given)?;
    // Compared after the proof, so that a proof cut short by the clock
    // still reports them: they decide `widened` whatever the solver says.
    report.credentials = rebound::compare(old, new);
    report.verdict = verdict(&report);
    Ok(report)
}

/// Containment (`diff --prove --within BOUNDARY CANDIDATE`): does the
/// boundary allow everything the candidate allows? Every request the
/// candidate lets through and the boundary does not, with a credential or
/// without; every credential the candidate injects where the boundary
/// injects none with the same secret and injection; every filesystem
/// right, `run_as`, Landlock mode and ABI, port, scope and seccomp rule
/// beyond the boundary's. Each is an excess; any unaccepted one makes the
/// verdict `exceeds`.
pub fn within(
    boundary: &Bundle,
    candidate: &Bundle,
    opts: &Options,
) -> Result<Report, ProverError> {
    if !opts.print_smt
        && boundary.digest == candidate.digest
        && boundary.enforcement == candidate.enforcement
    {
        let mut report = identical(opts, declares_credentials(candidate));
        report.containment = true;
        report.verdict = Verdict::Within;
        return Ok(report);
    }
    let mut report = run(
        Some(boundary),
        candidate,
        opts,
        Mode::Within,
        Given::default(),
    )?;
    report.containment = true;
    report.findings.append(&mut report.reach);
    report.sandbox = weakened::within(boundary, candidate);
    report.verdict = verdict(&report);
    Ok(report)
}

/// Which question a run answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Check,
    Diff,
    Within,
}

/// Two bundles with the same enforcement tables decide every request
/// alike: nothing is new, and no solver is needed.
fn identical(opts: &Options, credentials_declared: bool) -> Report {
    let started = Instant::now();
    let mut report = Report {
        verdict: Verdict::NoNewAccess,
        findings: Vec::new(),
        reach: Vec::new(),
        sandbox: Vec::new(),
        credentials: Vec::new(),
        credentials_declared,
        omitted: Vec::new(),
        inconclusive: None,
        notes: Vec::new(),
        smt: None,
        stats: Stats::default(),
        containment: false,
        unsupported: Vec::new(),
    };
    note_unknown_acceptances(opts, &mut report);
    report.stats.millis = started.elapsed().as_millis();
    report
}

fn note_unknown_acceptances(opts: &Options, report: &mut Report) {
    for a in &opts.accepted {
        // A standing acceptance would let every later swap of the secret
        // through unread: each change is reviewed.
        if a.category == Some(Category::CredentialChanged) {
            report.notes.push(format!(
                "accepted risk `{}` suppresses nothing: a changed credential is reviewed each time",
                a.query
            ));
        } else if a.category.is_none() {
            report.notes.push(format!(
                "accepted risk `{}` names no category this prover reports; it suppresses nothing",
                a.query
            ));
        }
    }
}

/// `check`: the risks of one policy on its own.
pub fn check(bundle: &Bundle, opts: &Options) -> Result<Report, ProverError> {
    run(None, bundle, opts, Mode::Check, Given::default())
}

fn run(
    old: Option<&Bundle>,
    new: &Bundle,
    opts: &Options,
    mode: Mode,
    given: Given<'_>,
) -> Result<Report, ProverError> {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(opts.timeout_ms);
    let bundles: Vec<&Bundle> = std::iter::once(new).chain(old).collect();
    let timings = Timings::new(opts.timings);
    let dom = Domain::build(
        &bundles,
        &extra(&bundles, opts),
        opts.string_search_budget,
        &timings,
    )?;
    timings.note(|| format!("domain {:?}", started.elapsed()));
    let past = || Instant::now() >= deadline + crate::solver::GRACE;
    let credentials_declared = bundles.iter().any(|b| declares_credentials(b));
    if past() {
        return Ok(out_of_time(
            opts,
            started,
            "building the domains",
            credentials_declared,
            mode,
        ));
    }
    let facts = binary_facts(&dom, &opts.registry);
    let mut defs = Defs::default();
    // The models of a diff are built from what the change can reach; the
    // domain above, blame and replay from the whole bundles.
    let sliced = match old {
        Some(o) if mode == Mode::Diff && opts.slice && !opts.print_smt => {
            crate::slice::slice(o, new)
        }
        _ => None,
    };
    if let Some(s) = &sliced {
        timings.note(|| {
            format!(
                "slice {:?}: {} changed grants, {} of {} kept",
                started.elapsed(),
                s.changed,
                s.kept,
                s.total
            )
        });
    }
    let (model_new, model_old) = match &sliced {
        Some(s) => (&s.new, Some(&s.old)),
        None => (new, old),
    };
    let nm = model::build("new", model_new, &dom, &facts, &Sandbox::of(new), &mut defs);
    let (nb, nm) = (new, nm);
    let old_side = old.zip(model_old).map(|(b, m)| {
        (
            b,
            model::build("old", m, &dom, &facts, &Sandbox::of(b), &mut defs),
        )
    });
    let meta = defs.define("metadata_destination", model::metadata_dest(&dom));
    if past() {
        return Ok(out_of_time(
            opts,
            started,
            "building the models",
            credentials_declared,
            mode,
        ));
    }
    let n = Side {
        bundle: nb,
        given: given.new,
        evaluator: std::cell::OnceCell::new(),
        model: nm,
    };
    let o = old_side.map(|(b, m)| Side {
        bundle: b,
        given: given.old,
        evaluator: std::cell::OnceCell::new(),
        model: m,
    });
    let queries = match &o {
        Some(o) if mode == Mode::Within => {
            query::within(&n.model, &o.model, n.bundle, o.bundle, &meta)
        }
        Some(o) => query::diff(&n.model, &o.model, &meta),
        None => query::single(&n.model, &meta),
    };
    timings.note(|| {
        let open = queries
            .iter()
            .filter(|q| !matches!(q.f, F::Const(false)))
            .count();
        format!(
            "models {:?} ({open} of {} queries not false by construction)",
            started.elapsed(),
            queries.len()
        )
    });
    let smt = LazySmt::new(opts.solver, &dom, &defs, deadline, &timings);
    let mut report = Report {
        verdict: Verdict::NoNewAccess,
        findings: Vec::new(),
        reach: Vec::new(),
        sandbox: old.map(|o| weakened::compare(o, new)).unwrap_or_default(),
        credentials: Vec::new(),
        credentials_declared,
        omitted: Vec::new(),
        inconclusive: None,
        notes: Vec::new(),
        smt: None,
        stats: Stats {
            binary_atoms: dom.bins.len(),
            host_atoms: dom.hosts.len(),
            path_atoms: dom.paths.len(),
            definitions: defs.items.len(),
            millis: 0,
            phases: Vec::new(),
        },
        containment: mode == Mode::Within,
        unsupported: Vec::new(),
    };
    if opts.print_smt {
        report.smt = Some(smt2(&smt, &queries)?);
    }
    let cx = Cx {
        dom: &dom,
        defs: &defs,
        n: &n,
        o: o.as_ref(),
        opts,
        mode,
    };
    let mut search = Search {
        dom: &dom,
        defs: &defs,
        smt: &smt,
        learned: Vec::new(),
        timings: &timings,
    };
    timings.note(|| format!("setup {:?} ({} defs)", started.elapsed(), defs.items.len()));
    for q in &queries {
        let t = Instant::now();
        let (found, outcome) = search.regions(&q.f, opts.max_regions);
        if smt.missing() {
            return Err(ProverError::SolverNeeded);
        }
        timings.note(|| {
            format!(
                "{} {:?}: {} regions in {:?} ({outcome:?})",
                q.category,
                q.variant,
                found.len(),
                t.elapsed()
            )
        });
        // A region none of whose points can be shown as a concrete request
        // is neither a finding nor nothing: it makes the verdict
        // inconclusive.
        let mut shown = Vec::new();
        for f in found.iter().take(opts.max_findings) {
            // A region without its witness is not shown as a finding.
            if past() {
                report.inconclusive.get_or_insert(format!(
                    "`{}` may hold, but the time ran out before its witness was shown",
                    q.category
                ));
                break;
            }
            match cx.finding(q, &f.region, &f.point) {
                Ok(finding) => shown.push(finding),
                Err(why) => {
                    report
                        .inconclusive
                        .get_or_insert(format!("`{}` may hold, but {why}", q.category));
                }
            }
        }
        if q.category.is_reach() {
            // Regions apart by a dimension the connection witness does not
            // show would read as the same line twice.
            for f in shown {
                if !report.reach.iter().any(|r| r.witness == f.witness) {
                    report.reach.push(f);
                }
            }
        } else {
            report.findings.extend(shown);
        }
        let mut counted = 0;
        for f in found.iter().skip(opts.max_findings) {
            if past() {
                report.inconclusive.get_or_insert(format!(
                    "`{}` may hold, but the time ran out while its regions were counted",
                    q.category
                ));
                break;
            }
            if witness::region_showable(&dom, &f.region) {
                counted += 1;
            } else {
                report.inconclusive.get_or_insert(format!(
                    "`{}` may hold in a region where no concrete string was found",
                    q.category
                ));
            }
        }
        if counted > 0 || outcome == Outcome::Capped {
            report.omitted.push(Omitted {
                category: q.category,
                count: counted,
                at_least: outcome == Outcome::Capped,
            });
        }
        if let Outcome::Inconclusive(why) = outcome {
            report.inconclusive.get_or_insert(format!(
                "the solver could not decide `{}`: {why}",
                q.category
            ));
        }
    }
    let t = Instant::now();
    if !past() {
        cx.secret_exposure(&search, &mut report);
    } else if !new.enforcement.secrets.is_empty() {
        report
            .inconclusive
            .get_or_insert("the time ran out before `secret_exposure` was asked".to_owned());
    }
    if smt.missing() {
        return Err(ProverError::SolverNeeded);
    }
    timings.note(|| format!("secret_exposure {:?}", t.elapsed()));
    note_unknown_acceptances(opts, &mut report);
    if mode == Mode::Within {
        report.unsupported = old.map(|b| unsupported(b, new)).unwrap_or_default();
    } else if let Some(why) = unmodelled_protocols(old, new) {
        {
            report.notes.push(why.clone());
            // A single policy's risk questions ask whether something can
            // happen: allowing more than enforcement does only adds answers.
            // A diff's "nothing new" would need OLD's decisions exactly.
            if old.is_some() {
                report.inconclusive.get_or_insert(why);
            }
        }
    }
    report.verdict = verdict(&report);
    report.stats.millis = started.elapsed().as_millis();
    timings.note(|| format!("answered {:?}", started.elapsed()));
    drop(search);
    report.stats.phases = timings.take();
    Ok(report)
}

/// The answer when the deadline passes before the solver is asked
/// anything: the phases before it can take seconds on a large policy, and
/// a caller's timeout is a promise to stop.
fn out_of_time(
    opts: &Options,
    started: Instant,
    phase: &str,
    credentials_declared: bool,
    mode: Mode,
) -> Report {
    let mut report = identical(opts, credentials_declared);
    report.containment = mode == Mode::Within;
    report.verdict = Verdict::Inconclusive;
    report.inconclusive = Some(format!(
        "the time ({} ms) ran out while {phase}",
        opts.timeout_ms
    ));
    report.stats.millis = started.elapsed().as_millis();
    report
}

/// Widened beats inconclusive (a shown widening stands whatever else was
/// undecided), inconclusive beats new reach (an undecided credentialed
/// question is not "no new credentialed access"), and anything new, even
/// accepted as a risk, rules out `no-new-access`.
fn verdict(report: &Report) -> Verdict {
    let found = |reach: bool| {
        report
            .omitted
            .iter()
            .any(|o| o.category.is_reach() == reach && (o.count > 0 || o.at_least))
    };
    if report.containment {
        // Every excess blocks, and an excess shown beats anything left
        // undecided or unsupported.
        return if report.findings.iter().any(|f| !f.suppressed)
            || !report.reach.is_empty()
            || !report.sandbox.is_empty()
            || !report.credentials.is_empty()
            || found(false)
            || found(true)
        {
            Verdict::Exceeds
        } else if !report.unsupported.is_empty() {
            Verdict::Unsupported
        } else if report.inconclusive.is_some() {
            Verdict::Inconclusive
        } else {
            Verdict::Within
        };
    }
    if report.findings.iter().any(|f| !f.suppressed)
        || !report.credentials.is_empty()
        || found(false)
    {
        Verdict::Widened
    } else if report.inconclusive.is_some() {
        Verdict::Inconclusive
    } else if !report.findings.is_empty()
        || !report.reach.is_empty()
        || !report.sandbox.is_empty()
        || found(true)
    {
        Verdict::NewReach
    } else {
        Verdict::NoNewAccess
    }
}

fn declares_credentials(b: &Bundle) -> bool {
    !b.enforcement.credentials.is_empty() || !b.enforcement.secrets.is_empty()
}

/// What the prover cannot see: endpoints of a protocol the model does not
/// know (`calls::modelled`) judge requests by something the model does
/// not represent. It takes such an endpoint to allow every request, so
/// widenings at the connection and HTTP level are still found; of a diff,
/// only a change that leaves every network table as it was (a filesystem
/// or process change) is certified.
fn unmodelled_protocols(old: Option<&Bundle>, new: &Bundle) -> Option<String> {
    let unknown = |b: &Bundle| {
        b.enforcement
            .l7
            .iter()
            .map(|e| e.protocol())
            .find(|p| !crate::calls::modelled(*p))
    };
    let protocol = unknown(new).or_else(|| old.and_then(unknown))?;
    let network_unchanged = old.is_some_and(|o| {
        let (o, n) = (&o.enforcement, &new.enforcement);
        o.seccomp == n.seccomp
            && o.l7 == n.l7
            && o.credentials == n.credentials
            && o.secrets == n.secrets
    });
    (!network_unchanged).then(|| {
        format!(
            "`{}` endpoints judge request bodies in a way the prover does not model: it treats \
             such an endpoint as allowing every request it sees, so a change to the network \
             rules of a policy that has one is not certified",
            protocol.keyword()
        )
    })
}

/// Containment: what the prover cannot compare. An endpoint of a protocol
/// the model does not know is taken to allow every request it sees
/// (`unmodelled_protocols`): in the candidate that could hide nothing,
/// but in either it leaves "within" unproved, since the boundary's
/// endpoint may refuse what the candidate's lets through. Unless the two
/// network tables are the same, each such protocol is named, with the
/// side and the host it guards.
fn unsupported(boundary: &Bundle, candidate: &Bundle) -> Vec<String> {
    let (b, c) = (&boundary.enforcement, &candidate.enforcement);
    if b.seccomp == c.seccomp && b.l7 == c.l7 && b.credentials == c.credentials {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (side, bundle) in [("candidate", candidate), ("boundary", boundary)] {
        let mut seen = std::collections::BTreeSet::new();
        for e in &bundle.enforcement.l7 {
            let p = e.protocol();
            if !crate::calls::modelled(p) && seen.insert(p.keyword()) {
                out.push(format!(
                    "the {side} has `{}` endpoints, which judge request bodies in a way the \
                     prover does not model: whether the boundary admits what such an endpoint \
                     lets through cannot be compared",
                    p.keyword()
                ));
            }
        }
    }
    out
}

/// The problem as SMT-LIB 2 (`--print-smt`): the solver's own rendering.
fn smt2(smt: &LazySmt<'_>, queries: &[Query]) -> Result<String, ProverError> {
    let smt = smt.get().ok_or(ProverError::SolverNeeded)?;
    let mut text = smt.smt2();
    for q in queries {
        text.push_str(&format!(
            "; query {} ({:?})\n(assert {})\n",
            q.category,
            q.variant,
            smt.term(&q.f)
        ));
    }
    Ok(text)
}

/// What the evaluator says of a witness in NEW and OLD, and whether its
/// destination is a metadata one.
type Observations = (Observed, Option<Observed>, bool);

struct Cx<'a> {
    dom: &'a Domain,
    defs: &'a Defs,
    n: &'a Side<'a>,
    o: Option<&'a Side<'a>>,
    opts: &'a Options,
    mode: Mode,
}

impl Cx<'_> {
    fn observe(
        &self,
        req: &policy_bundle::eval::Request,
        body: Option<&[u8]>,
        probe: Option<&Probe>,
    ) -> Observations {
        let reg = &self.opts.registry;
        let n = witness::observe(self.n.eval(), req, body, probe, reg);
        let o = self
            .o
            .map(|o| witness::observe(o.eval(), req, body, probe, reg));
        (n, o, n.meta)
    }

    fn finding(&self, q: &Query, r: &Region, x: &Point) -> Result<Finding, String> {
        let p = witness::choose(self.dom, self.defs, &q.f, r, x);
        if let Some(why) = witness::unshowable(self.dom, &p) {
            return Err(why);
        }
        match q.variant {
            Variant::BodyRewrite(i) => {
                // A body is most at home in a POST: show one when the
                // region holds it (the replay checks the point).
                let mut post = p.clone();
                post.method = self.dom.method_index("POST");
                let p = if r.contains(&post, self.dom) && post.eval(&q.f, &self.defs.values(&post))
                {
                    post
                } else {
                    p
                };
                return self.rewrite_finding(q, r, &p, i, false);
            }
            Variant::TextRewrite(i) => return self.rewrite_finding(q, r, &p, i, true),
            _ => {}
        }
        let full = witness::request(self.dom, &p);
        let body = witness::body(self.dom, &p);
        let probe = witness::probe(self.dom, &p);
        let (req, body, probe, (nobs, oobs, meta)) = self.witness_form(q, full, body, probe);
        let mut verified = query::holds(q.category, q.variant, &nobs, oobs.as_ref(), meta);
        let nd = witness::decide(self.n.eval(), &req, body.as_deref(), probe.as_ref());
        let new_rule = nd.rule.as_ref().map(Loc::of);
        let (old_reason, old_rule) = match self.o {
            Some(o) => {
                let od = witness::decide(o.eval(), &req, body.as_deref(), probe.as_ref());
                let conn = oobs.is_some_and(|x| x.conn);
                let (mut text, at) = finding::old_reason(&od, conn);
                if conn && od.decision != policy_bundle::eval::Verdict::Deny {
                    text = self.old_context(q, &od, text);
                }
                (text, at)
            }
            None => (String::new(), None),
        };
        let (old_reason, old_rule) = match (q.variant, self.o) {
            (Variant::Credential(i), Some(o)) => {
                let od = witness::decide(o.eval(), &req, body.as_deref(), probe.as_ref());
                let (ok, why) = self.other_credential(i, &nd, &od, oobs.as_ref());
                verified = ok;
                (why, od.rule.as_ref().map(Loc::of))
            }
            _ => (old_reason, old_rule),
        };
        let old_reason = if self.mode == Mode::Within {
            old_reason.replace("the old policy", "the boundary")
        } else {
            old_reason
        };
        let region = finding::summarize(self.dom, r);
        let w = Witness::with_body(&req, body.as_deref()).with_probe(probe.as_ref());
        let message = self.message(q, &w, &nd, &region, &nobs);
        let (suppressed, acceptance) = self.suppression(q.category, r);
        Ok(Finding {
            category: q.category,
            message,
            witness: w,
            new_rule,
            old_reason,
            old_rule,
            suppressed,
            acceptance,
            region,
            verified,
            code: q.category.code().id,
        })
    }

    /// A finding of a rewrite question (`crate::rewrite`): the witness
    /// carries the placeholder of NEW's credential `i`, in a JSON body or
    /// (`text_message`) a WebSocket text message, and is verified when
    /// NEW lets it through with the secret in its place and OLD does not.
    fn rewrite_finding(
        &self,
        q: &Query,
        r: &Region,
        p: &Point,
        i: usize,
        text_message: bool,
    ) -> Result<Finding, String> {
        let name = self
            .n
            .bundle
            .enforcement
            .credentials
            .get(i)
            .map(|c| c.name.clone())
            .ok_or_else(|| "its credential is missing".to_owned())?;
        let (req, body, probe) = crate::placeholder::witness(self.dom, p, &name, text_message)?;
        let decide =
            |ev: &Evaluator| crate::placeholder::decide(ev, &req, body.as_deref(), probe.as_ref());
        let nd = decide(self.n.eval());
        let (old_reason, old_rule, old_sends) = match self.o {
            Some(o) => {
                let od = decide(o.eval());
                let conn = o
                    .eval()
                    .decide_connection(
                        &req.binary,
                        req.sha256.as_deref(),
                        req.host.as_deref(),
                        req.addr,
                        req.port,
                    )
                    .allowed();
                (
                    crate::placeholder::old_reason(&od, conn),
                    od.rule.as_ref().map(Loc::of),
                    crate::placeholder::sends_secret(&od, &name),
                )
            }
            None => (String::new(), None, false),
        };
        let old_reason = if self.mode == Mode::Within {
            old_reason.replace("the old policy", "the boundary")
        } else {
            old_reason
        };
        let mut w = Witness::with_body(&req, body.as_deref()).with_probe(probe.as_ref());
        if !text_message {
            w.content_type = Some(crate::placeholder::CONTENT_TYPE.to_owned());
        }
        let region = finding::summarize(self.dom, r);
        let message = crate::placeholder::message(&name, &w, text_message);
        let message = if self.mode == Mode::Within {
            message.replacen(" now ", " ", 1)
        } else {
            message
        };
        let (suppressed, acceptance) = self.suppression(q.category, r);
        Ok(Finding {
            category: q.category,
            message: format!("{message} [{}]", region.text),
            witness: w,
            new_rule: nd.rule.as_ref().map(Loc::of),
            old_reason,
            old_rule,
            suppressed,
            acceptance,
            region,
            verified: crate::placeholder::sends_secret(&nd, &name) && !old_sends,
            code: q.category.code().id,
        })
    }

    /// The form a witness is shown in: a connection (binary, destination,
    /// port) when the widening is at the connection level, that is, for
    /// `l7_bypass_credentialed`, and for any other category when NEW relays
    /// the connection uninspected and the connection alone shows the
    /// widening; else the full request.
    fn witness_form(
        &self,
        q: &Query,
        full: policy_bundle::eval::Request,
        body: Option<Vec<u8>>,
        probe: Option<Probe>,
    ) -> (
        policy_bundle::eval::Request,
        Option<Vec<u8>>,
        Option<Probe>,
        Observations,
    ) {
        let obs = self.observe(&full, body.as_deref(), probe.as_ref());
        let conn = policy_bundle::eval::Request {
            http: None,
            ..full.clone()
        };
        let cobs = self.observe(&conn, None, None);
        let connection_level = q.category == Category::L7BypassCredentialed
            || (cobs.0.conn
                && (cobs.0.bypass || !cobs.0.inspected)
                && query::holds(q.category, q.variant, &cobs.0, cobs.1.as_ref(), cobs.2));
        if connection_level {
            (conn, None, None, cobs)
        } else {
            (full, body, probe, obs)
        }
    }

    fn old_context(&self, q: &Query, _od: &policy_bundle::eval::Decision, text: String) -> String {
        match q.category {
            Category::L7BypassCredentialed => {
                format!(
                    "the old policy inspected this connection or held no credential for it ({text})"
                )
            }
            Category::WritableBinaryIdentity => {
                format!(
                    "the old policy allowed it, but not from a path the workload can write ({text})"
                )
            }
            Category::CredentialReachExpansion => {
                format!("the old policy let it through without a credential ({text})")
            }
            _ => text,
        }
    }

    /// Containment, `Variant::Credential(i)`: whether the candidate injects
    /// its credential `i` on the witness while the boundary lets it through
    /// carrying no credential that sends the same secret the same way,
    /// and what the boundary does instead.
    fn other_credential(
        &self,
        i: usize,
        nd: &policy_bundle::eval::Decision,
        od: &policy_bundle::eval::Decision,
        oobs: Option<&Observed>,
    ) -> (bool, String) {
        let Some(o) = self.o else {
            return (false, String::new());
        };
        let Some(c) = self.n.bundle.enforcement.credentials.get(i) else {
            return (false, String::new());
        };
        let same = |name: &str| {
            o.bundle
                .enforcement
                .credentials
                .iter()
                .any(|b| b.name == name && crate::secret::same_secret(b, c))
        };
        let injected = nd.credential.as_deref() == Some(c.name.as_str());
        let let_through = oobs.is_some_and(|x| x.allow);
        let ok = injected && let_through && od.credential.as_deref().is_none_or(|b| !same(b));
        let why = match od.credential.as_deref() {
            Some(b) => match o.bundle.enforcement.credentials.iter().find(|x| x.name == b) {
                Some(x) => format!(
                    "injects credential `{b}` there instead (secret `{}`, {})",
                    rebound::source_text(&x.source),
                    rebound::inject_text(&x.inject)
                ),
                None => format!("injects credential `{b}` there instead"),
            },
            None => "lets it through without injecting a credential (the workload holds a secret for the host)".to_owned(),
        };
        (ok, why)
    }

    fn credential_named(&self, w: &Witness, d: &policy_bundle::eval::Decision) -> String {
        if let Some(c) = &d.credential {
            return format!("credential `{c}`");
        }
        let t = &self.n.bundle.enforcement;
        let host = policy_bundle::matcher::normalize_host(&w.host).ok();
        let bound = host.as_deref().and_then(|h| {
            t.credentials
                .iter()
                .find(|c| c.hosts.iter().any(|p| p.matches(h)))
                .map(|c| format!("credential `{}`", c.name))
                .or_else(|| {
                    t.secrets
                        .iter()
                        .find(|s| s.hosts.iter().any(|p| p.matches(h)))
                        .map(|s| format!("secret `{}`", s.name))
                })
        });
        bound.unwrap_or_else(|| "a sandbox-held secret".to_owned())
    }

    fn message(
        &self,
        q: &Query,
        w: &Witness,
        nd: &policy_bundle::eval::Decision,
        r: &finding::RegionSummary,
        obs: &Observed,
    ) -> String {
        let cred = self.credential_named(w, nd);
        let dest = format!("{}:{}", w.host, w.port);
        let req = w.request_text();
        let m = match (q.category, q.variant) {
            (Category::CredentialReachExpansion, Variant::Credential(i)) => {
                let how = self
                    .n
                    .bundle
                    .enforcement
                    .credentials
                    .get(i)
                    .map(|c| {
                        format!(
                            " (secret `{}`, {})",
                            rebound::source_text(&c.source),
                            rebound::inject_text(&c.inject)
                        )
                    })
                    .unwrap_or_default();
                format!(
                    "{cred}{how} is injected into `{req}` from `{}`, where the boundary injects no credential that sends the same secret the same way",
                    w.binary
                )
            }
            (Category::CredentialReachExpansion, Variant::NewlyAttached) => {
                format!("{cred} is now attached to `{req}` from `{}`", w.binary)
            }
            (Category::CredentialReachExpansion, _) => {
                format!(
                    "`{}` can now reach `{dest}`, where {cred} applies",
                    w.binary
                )
            }
            (Category::CapabilityExpansion, _) => format!(
                "`{}` may now send {} to `{dest}`, where {cred} applies (e.g. `{req}`)",
                w.binary,
                r.methods.join(" "),
            ),
            (Category::EnforcementDowngrade, _) => {
                if self.o.is_some() {
                    format!(
                        "`{req}` is now forwarded in audit mode instead of denied, with {cred} in scope"
                    )
                } else {
                    format!(
                        "audit mode forwards `{req}` although no rule allows it, with {cred} in scope"
                    )
                }
            }
            (Category::L7BypassCredentialed, _) => {
                let facts = self.opts.registry.facts(&w.binary);
                let why = match (&facts.bypass_protocol, obs.inspected) {
                    (Some(p), true) => format!(
                        "`{}` speaks {p}, which the L7 proxy cannot inspect",
                        w.binary
                    ),
                    _ => "the connection is relayed without inspection".to_owned(),
                };
                format!(
                    "`{}` reaches `{dest}`, where {cred} applies, uninspected: {why}",
                    w.binary
                )
            }
            (Category::MetadataReach, _) => {
                format!(
                    "`{}` can reach the metadata / link-local destination `{dest}`",
                    w.binary
                )
            }
            (Category::WritableBinaryIdentity, _) => format!(
                "`{}` lies where the workload can write: a program planted there inherits reach to `{dest}`",
                w.binary
            ),
            (Category::SecretExposure, _) => format!("`{}` can send it to `{dest}`", w.binary),
            (Category::ReachExpansion, Variant::Uninspected) => format!(
                "`{}` can now connect to `{dest}`, relayed uninspected where the boundary inspects every request (or refuses the connection); no credential applies",
                w.binary
            ),
            (Category::ReachExpansion, _) => {
                if w.is_connection() {
                    format!(
                        "`{}` can now connect to `{dest}`, relayed uninspected; no credential applies",
                        w.binary
                    )
                } else {
                    format!("`{}` may now send `{req}`; no credential applies", w.binary)
                }
            }
            // Not asked per request (`weakened`, `rebound`).
            (
                Category::FileRightsExpansion
                | Category::EnforcementWeakened
                | Category::CredentialChanged,
                _,
            ) => {
                format!("`{}` reaches `{dest}`", w.binary)
            }
        };
        // Containment compares two policies side by side, not a change
        // in time: "can now reach" reads "can reach", beyond the boundary.
        let m = if self.mode == Mode::Within {
            m.replacen(" now ", " ", 1)
        } else {
            m
        };
        format!("{m} [{}]", r.text)
    }

    /// Whether an acceptance covers the whole region.
    fn suppression(
        &self,
        cat: Category,
        r: &Region,
    ) -> (bool, Option<crate::accepted::AcceptanceNote>) {
        let now = today();
        let mut expired_note = None;
        let mut miss = None;
        for a in self
            .opts
            .accepted
            .iter()
            .filter(|a| a.category == Some(cat))
        {
            if let Some(why) = self.uncovered(a, r) {
                miss.get_or_insert_with(|| crate::accepted::AcceptanceNote {
                    not_covered: Some(why),
                    expired: None,
                    ..a.note(now)
                });
                continue;
            }
            if a.expired(now) {
                expired_note.get_or_insert(a.note(now));
                continue;
            }
            return (true, Some(a.note(now)));
        }
        (false, expired_note.or(miss))
    }

    /// What of the region an acceptance's scope leaves out, first field
    /// first; `None` when it covers the whole region.
    fn uncovered(&self, a: &Acceptance, r: &Region) -> Option<String> {
        let dom = self.dom;
        let outside = |set: &[u32], allowed: &[u32]| -> Vec<u32> {
            set.iter()
                .copied()
                .filter(|x| !allowed.contains(x))
                .collect()
        };
        let listed = |v: Vec<String>| format!("`{}`", v.join("`, `"));
        if let Some(b) = &a.binary {
            let out = outside(&r.bins, dom.bins.atoms_of(&domain::binary_key(b)));
            if !out.is_empty() {
                let names = crate::finding::names(&dom.bins, &out, "other binaries");
                return Some(format!(
                    "`binary: {b}` does not cover {} in the finding",
                    listed(names)
                ));
            }
        }
        match &a.dest {
            Some(DestScope::Hosts(hs)) => {
                let allowed: Vec<u32> = hs
                    .iter()
                    .flat_map(|h| dom.hosts.atoms_of(&domain::host_key(h)).iter().copied())
                    .collect();
                let out = outside(&r.hosts, &allowed);
                if !out.is_empty() {
                    let names = crate::finding::names(&dom.hosts, &out, "other hosts");
                    return Some(format!(
                        "its hosts do not cover {} in the finding",
                        listed(names)
                    ));
                }
            }
            Some(DestScope::Addrs(set)) => {
                // Cells are wholly inside or outside every set the domain
                // was built from (the scope's set is one of them).
                let ok = r.hosts.iter().all(|&h| h == dom.host_none())
                    && r.addr_cells(dom)
                        .iter()
                        .all(|c| c.first_ip().is_some_and(|ip| set.contains(ip)));
                if !ok {
                    return Some(
                        "its addresses do not cover every destination in the finding".to_owned(),
                    );
                }
            }
            None => {}
        }
        if let Some(ps) = &a.ports {
            let out: Vec<(u16, u16)> = r
                .port_cells(dom)
                .into_iter()
                .filter(|&(lo, hi)| !(lo..=hi).all(|x| ps.contains(x)))
                .collect();
            if let Some(&(lo, hi)) = out.first() {
                let shown = if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                };
                return Some(format!(
                    "its ports `{ps}` do not cover port {shown} in the finding"
                ));
            }
        }
        if let Some(ms) = &a.methods {
            let allowed: Vec<u32> = ms.iter().map(|m| dom.method_index(m)).collect();
            let other = u32::try_from(dom.methods.len().saturating_sub(1)).unwrap_or(0);
            let out: Vec<String> = r
                .methods
                .iter()
                .filter(|m| !allowed.contains(m) || **m == other)
                .map(|&m| {
                    if m == other {
                        "other methods".to_owned()
                    } else {
                        dom.methods.get(m as usize).cloned().unwrap_or_default()
                    }
                })
                .collect();
            if !out.is_empty() {
                return Some(format!(
                    "its methods do not cover {} in the finding",
                    listed(out)
                ));
            }
        }
        if let Some(ps) = &a.paths {
            let allowed: Vec<u32> = ps
                .iter()
                .flat_map(|p| dom.paths.atoms_of(&domain::path_key(p)).iter().copied())
                .collect();
            let out = outside(&r.paths, &allowed);
            if !out.is_empty() {
                let names = crate::finding::names(&dom.paths, &out, "other paths");
                return Some(format!(
                    "its paths do not cover {} in the finding",
                    listed(names)
                ));
            }
        }
        None
    }

    /// `secret_exposure`: per sandbox-held secret the workload can read,
    /// the binaries that can exfiltrate and have somewhere to send it (and
    /// could not before).
    fn secret_exposure(&self, search: &Search<'_>, report: &mut Report) {
        let dom = self.dom;
        let facts = binary_facts(dom, &self.opts.registry);
        let nsand = Sandbox::of(self.n.bundle);
        let full = Region::full(dom);
        // A point where `f` holds: the finite-domain search first, Z3 when
        // it gives up. `Err` when neither can tell.
        let model_of = |f: &F| -> Result<Option<Point>, ()> {
            let g = and([f.clone(), search.destination()]);
            let deadline = search.smt.hard_deadline();
            match crate::fd::find(dom, self.defs, &g, &full, crate::fd::BUDGET, deadline) {
                crate::fd::Outcome::Sat(x) => return Ok(Some(x)),
                crate::fd::Outcome::Unsat => return Ok(None),
                crate::fd::Outcome::GaveUp => {}
            }
            search.smt.model_of(f)
        };
        let sends = |m: &Model, bin: u32| -> Option<bool> {
            let f = and([m.allow.clone(), lit(Lit::Bin(ids(vec![bin])))]);
            model_of(&f).ok().map(|x| x.is_some())
        };
        let mut n_cache: Vec<Option<Option<bool>>> = vec![None; dom.bins.len()];
        let mut o_cache: Vec<Option<Option<bool>>> = vec![None; dom.bins.len()];
        let secrets = &self.n.bundle.enforcement.secrets;
        for (i, s) in secrets.iter().enumerate() {
            if !nsand.can_read(&s.source) {
                continue;
            }
            let old_has = self.o.is_some_and(|o| {
                let osand = Sandbox::of(o.bundle);
                o.bundle
                    .enforcement
                    .secrets
                    .iter()
                    .any(|x| x.source == s.source && osand.can_read(&x.source))
            });
            let mut bins = Vec::new();
            for &b in &facts.exfil {
                let Some(slot) = n_cache.get_mut(b as usize) else {
                    continue;
                };
                let ns = *slot.get_or_insert_with(|| sends(&self.n.model, b));
                let Some(ns) = ns else {
                    report
                        .inconclusive
                        .get_or_insert("the solver could not decide `secret_exposure`".to_owned());
                    continue;
                };
                if !ns {
                    continue;
                }
                if old_has && let Some(o) = self.o {
                    let Some(slot) = o_cache.get_mut(b as usize) else {
                        continue;
                    };
                    match *slot.get_or_insert_with(|| sends(&o.model, b)) {
                        Some(true) => continue,
                        Some(false) => {}
                        None => {
                            report.inconclusive.get_or_insert(
                                "the solver could not decide `secret_exposure`".to_owned(),
                            );
                            continue;
                        }
                    }
                }
                bins.push(b);
            }
            if bins.is_empty() {
                continue;
            }
            let q = and([self.n.model.allow.clone(), lit(Lit::Bin(ids(bins.clone())))]);
            let Ok(Some(x)) = model_of(&q) else { continue };
            let mut region = Region::full(dom);
            region.bins = bins;
            let p = witness::choose(dom, self.defs, &q, &region, &x);
            if let Some(why) = witness::unshowable(dom, &p) {
                report
                    .inconclusive
                    .get_or_insert(format!("`secret_exposure` may hold, but {why}"));
                continue;
            }
            let req = witness::request(dom, &p);
            let body = witness::body(dom, &p);
            let probe = witness::probe(dom, &p);
            let (nobs, oobs, _) = self.observe(&req, body.as_deref(), probe.as_ref());
            let nd = witness::decide(self.n.eval(), &req, body.as_deref(), probe.as_ref());
            let origin = self.n.bundle.provenance.secrets.get(i).map(Loc::of);
            let mut summary = finding::summarize(dom, &region);
            summary.text = format!("binaries {}", summary.binaries.join(", "));
            let w = Witness::with_body(&req, body.as_deref()).with_probe(probe.as_ref());
            let source = match &s.source {
                policy_bundle::SecretSource::Env(v) => format!("environment variable `{v}`"),
                policy_bundle::SecretSource::File(f) => {
                    let by = nsand.reader_of(f).unwrap_or("?");
                    format!("file `{f}`, readable under `{by}`")
                }
            };
            let message = format!(
                "secret `{}` ({source}) is readable in the sandbox, and `{}` can send it to `{}:{}` [{}]",
                s.name, w.binary, w.host, w.port, summary.text
            );
            let (suppressed, acceptance) = self.suppression(Category::SecretExposure, &region);
            report.findings.push(Finding {
                category: Category::SecretExposure,
                message,
                witness: w,
                new_rule: origin.or_else(|| nd.rule.as_ref().map(Loc::of)),
                old_reason: if self.o.is_some() {
                    if old_has {
                        "in the old policy these binaries had nowhere to send it".to_owned()
                    } else {
                        "the old policy held no such readable secret".to_owned()
                    }
                } else {
                    String::new()
                },
                old_rule: None,
                suppressed,
                acceptance,
                region: summary,
                verified: nobs.allow && (!old_has || oobs.is_none_or(|o| !o.allow)),
                code: Category::SecretExposure.code().id,
            });
        }
    }
}
