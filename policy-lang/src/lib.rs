//! The policy language: parse, diagnostics, formatter, OpenShell import, IR,
//! matchers, compiler, bundle and the reference evaluator.

pub mod ast;
pub mod bundle;
pub mod compile;
pub mod diag;
pub mod eval;
pub mod fmt;
pub mod import;
pub mod ir;
pub mod l7body;
pub mod lint;
mod linux;
pub mod load;
pub mod matcher;
pub mod parser;
pub mod resolve;
pub mod source;
