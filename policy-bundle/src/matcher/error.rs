//! The one error type every pattern parser returns.
//!
//! Pattern errors are data, not pre-rendered strings: the compiler turns the
//! byte offset into a file/line/column span and shows `help` as the fix, so
//! every parser here has to say where inside the pattern text it gave up.

/// A pattern that does not parse, with where and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PatternError {
    /// What is wrong, lowercase, user input in backticks.
    pub message: String,
    /// How to fix it.
    pub help: String,
    /// Byte offset inside the pattern text where the problem is.
    pub offset: usize,
}

impl PatternError {
    pub(crate) fn new(message: impl Into<String>, help: impl Into<String>, offset: usize) -> Self {
        Self {
            message: message.into(),
            help: help.into(),
            offset,
        }
    }
}
