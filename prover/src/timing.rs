//! Where a run's time went, phase by phase. The library records the lines
//! only when asked (`Options::timings`) and returns them in the report's
//! stats; printing them is the caller's business (the CLI does it under
//! `PROVER_TIMING`, and `bench/prover.sh` reads them).

use std::cell::RefCell;

/// The lines of one run, when asked for.
#[derive(Debug, Default)]
pub struct Timings {
    on: bool,
    lines: RefCell<Vec<String>>,
}

impl Timings {
    #[must_use]
    pub(crate) fn new(on: bool) -> Self {
        Timings {
            on,
            lines: RefCell::default(),
        }
    }

    /// Records one line; `line` is only called when timings are on.
    pub fn note(&self, line: impl FnOnce() -> String) {
        if self.on {
            self.lines.borrow_mut().push(line());
        }
    }

    #[must_use]
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.borrow_mut())
    }
}
