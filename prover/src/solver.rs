//! The SMT solver of one proof, created when a question first needs it.
//!
//! Most questions of a typical change are settled by the finite-domain
//! search ([`crate::fd`]) without one. The solver itself is a [`Backend`]
//! the caller passes in [`Options::solver`](crate::Options::solver)
//! (`prover-z3` is the one there is): this crate does not link `libz3`,
//! so a program that never passes one does not pay for loading it (about
//! a third of a typical `diff --prove`). When a proof without a backend
//! meets a question that needs one, it stops with
//! [`ProverError::SolverNeeded`](crate::error::ProverError::SolverNeeded)
//! and the caller runs it again where there is one (the CLI hands the
//! command to `openshell-policy-solver`).

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::time::{Duration, Instant};

use crate::domain::Domain;
use crate::formula::{Defs, F, Point};
use crate::timing::Timings;

/// How long past the solver's deadline the rest of a proof may run: the
/// finite-domain search still settles a question with no solution that
/// takes it a few milliseconds (a zero budget does not make a small
/// policy inconclusive), but nothing runs on for longer.
pub(crate) const GRACE: Duration = Duration::from_millis(50);

/// An SMT solver for the questions the finite-domain search cannot
/// settle. A trait, so that only the programs that pass one link it.
pub trait Backend: fmt::Debug + Send + Sync {
    /// A solver over `dom`'s variables with every definition of `defs`
    /// asserted. It answers [`Sat::Unknown`] once `deadline` has passed,
    /// and notes its set-up phases in `timings`.
    fn start(
        &self,
        dom: &Domain,
        defs: &Defs,
        deadline: Instant,
        timings: &Timings,
    ) -> Box<dyn Session>;
}

/// One proof's solver: assertions in nested scopes, checked together.
pub trait Session {
    /// Opens a scope.
    fn push(&self);
    /// Drops the innermost scope and what was asserted in it.
    fn pop(&self);
    /// Asserts `f` in the innermost scope.
    fn assert(&self, f: &F);
    /// Whether everything asserted holds together, with the time left.
    fn check(&self) -> Sat;
    /// A point satisfying the assertions, after a check answered
    /// [`Sat::Sat`].
    fn model(&self) -> Option<Point>;
    /// The variables, domains and definitions as SMT-LIB 2.
    fn smt2(&self) -> String;
    /// One formula as an SMT-LIB 2 term over [`Self::smt2`]'s names.
    fn term(&self, f: &F) -> String;
}

/// A check's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sat {
    /// The assertions have a solution.
    Sat,
    /// They have none.
    Unsat,
    /// The solver gave up; why (`timeout` once the deadline has passed).
    Unknown(String),
}

impl fmt::Display for Sat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Sat::Sat => "Sat",
            Sat::Unsat => "Unsat",
            Sat::Unknown(_) => "Unknown",
        })
    }
}

pub(crate) struct LazySmt<'a> {
    backend: Option<&'static dyn Backend>,
    dom: &'a Domain,
    defs: &'a Defs,
    deadline: Instant,
    timings: &'a Timings,
    cell: OnceCell<Box<dyn Session>>,
    /// A question needed a solver and there is none.
    missing: Cell<bool>,
}

impl<'a> LazySmt<'a> {
    pub(crate) fn new(
        backend: Option<&'static dyn Backend>,
        dom: &'a Domain,
        defs: &'a Defs,
        deadline: Instant,
        timings: &'a Timings,
    ) -> Self {
        LazySmt {
            backend,
            dom,
            defs,
            timings,
            deadline,
            cell: OnceCell::new(),
            missing: Cell::new(false),
        }
    }

    /// The solver, started on first use; `None` when there is no backend,
    /// which is recorded ([`Self::missing`]): the caller's stand-in answer
    /// holds until the proof is abandoned.
    pub(crate) fn get(&self) -> Option<&dyn Session> {
        let Some(backend) = self.backend else {
            self.missing.set(true);
            return None;
        };
        let session = self.cell.get_or_init(|| {
            let t = Instant::now();
            let s = backend.start(self.dom, self.defs, self.deadline, self.timings);
            self.timings
                .note(|| format!("  smt created {:?}", t.elapsed()));
            s
        });
        Some(&**session)
    }

    /// A point where `f` holds, by the solver; `Err` when it cannot tell.
    pub(crate) fn model_of(&self, f: &F) -> Result<Option<Point>, ()> {
        let Some(smt) = self.get() else {
            return Err(());
        };
        smt.push();
        smt.assert(f);
        let r = match smt.check() {
            Sat::Sat => smt.model().map(Some).ok_or(()),
            Sat::Unsat => Ok(None),
            Sat::Unknown(_) => Err(()),
        };
        smt.pop();
        r
    }

    /// Whether a question needed a solver and there is none: the proof's
    /// answers are then not to be trusted, and it must be run again with
    /// one.
    pub(crate) fn missing(&self) -> bool {
        self.missing.get()
    }

    /// When the solver budget runs out.
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// When everything else stops too ([`GRACE`] after the deadline).
    pub(crate) fn hard_deadline(&self) -> Instant {
        self.deadline + GRACE
    }
}
