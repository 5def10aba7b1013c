//! Errors of the prover library.

/// Why a proof could not be attempted or finished.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProverError {
    /// An automaton over a dimension's patterns could not be built (too
    /// large, or a regex the automaton builder refuses).
    #[error("cannot build the automaton over the patterns: {0}")]
    Automaton(String),
    /// A binary capability registry file is not valid.
    #[error("invalid binary registry `{path}`: {message}")]
    Registry {
        /// The file as the user named it.
        path: String,
        /// What is wrong in it.
        message: String,
    },
    /// An accepted-risks file is not valid.
    #[error("invalid accepted-risks file `{path}`: {message}")]
    AcceptedRisks {
        /// The file as the user named it.
        path: String,
        /// What is wrong in it.
        message: String,
    },
    /// A question needs Z3, which this build does not link
    /// (`crate::solver`): the proof must run where it is linked.
    #[error(
        "this question needs the Z3 solver, which this build does not link (`openshell-policy-solver` does)"
    )]
    SolverNeeded,
    /// A file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The file as the user named it.
        path: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}
