//! What an inspected request body asks the upstream server to do.
//!
//! The proxy buffers a body (within a limit), hands it here, and matches the
//! answer against the endpoint's rules with the patterns of `matcher`. The
//! analysis must never report less than the server would run: anything it
//! cannot read exactly is an error, and the proxy denies on error.

pub mod graphql;
