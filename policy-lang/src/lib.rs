//! The policy language: parse, diagnostics, formatter, OpenShell import, IR,
//! matchers, compiler, bundle and the reference evaluator.

pub mod matcher;
