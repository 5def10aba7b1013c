//! The policy language's front end: parse, diagnostics, formatter,
//! OpenShell import, IR and the compiler that writes a bundle
//! (`policy-bundle`, which holds the bundle's types, the matchers and the
//! evaluator).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ast;
pub mod compile;
pub mod diag;
pub mod fmt;
pub mod import;
pub mod ir;
pub mod lint;
pub mod load;
pub mod parser;
pub mod resolve;
pub mod source;
