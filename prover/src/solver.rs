//! The Z3 solver of one proof, created when a question first needs it.
//!
//! Most questions of a typical change are settled by the finite-domain
//! search ([`crate::fd`]) without Z3. A build without the `z3` feature
//! does not link `libz3` at all, which saves every process its loading
//! (about a third of a typical `diff --prove`); when such a build meets a
//! question that needs Z3, the proof stops with
//! [`ProverError::SolverNeeded`](crate::error::ProverError::SolverNeeded)
//! and the caller runs it again where Z3 is linked (the CLI hands the
//! command to `openshell-policy-solver`).

use std::cell::Cell;
use std::time::{Duration, Instant};

/// How long past the solver's deadline the rest of a proof may run: the
/// finite-domain search still settles a question with no solution that
/// takes it a few milliseconds (a zero budget does not make a small
/// policy inconclusive), but nothing runs on for longer.
pub(crate) const GRACE: Duration = Duration::from_millis(50);

use crate::domain::Domain;
use crate::formula::Defs;
use crate::timing::Timings;

/// Whether this build links Z3 and answers every question in process.
pub const IN_PROCESS: bool = cfg!(feature = "z3");

pub(crate) struct LazySmt<'a> {
    dom: &'a Domain,
    defs: &'a Defs,
    deadline: Instant,
    timings: &'a Timings,
    #[cfg(feature = "z3")]
    cell: std::cell::OnceCell<crate::smt::Smt>,
    /// A question needed Z3 and this build has none.
    missing: Cell<bool>,
}

impl<'a> LazySmt<'a> {
    pub(crate) fn new(
        dom: &'a Domain,
        defs: &'a Defs,
        deadline: Instant,
        timings: &'a Timings,
    ) -> Self {
        LazySmt {
            dom,
            defs,
            timings,
            deadline,
            #[cfg(feature = "z3")]
            cell: std::cell::OnceCell::new(),
            missing: Cell::new(false),
        }
    }

    /// The solver, created on first use.
    #[cfg(feature = "z3")]
    pub(crate) fn get(&self) -> &crate::smt::Smt {
        self.cell.get_or_init(|| {
            let t = Instant::now();
            let mut smt = crate::smt::Smt::new(self.dom, self.deadline, self.timings);
            smt.define(self.defs);
            self.timings
                .note(|| format!("  z3 created {:?}", t.elapsed()));
            smt
        })
    }

    /// Records that a question needed Z3, which this build lacks; the
    /// answer it returns stands in until the proof is abandoned
    /// ([`Self::missing`]).
    #[cfg(not(feature = "z3"))]
    pub(crate) fn absent<T>(&self, stand_in: T) -> T {
        self.missing.set(true);
        stand_in
    }

    /// Whether a question needed Z3 and this build has none: the proof's
    /// answers are then not to be trusted, and it must be run again where
    /// Z3 is linked.
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
