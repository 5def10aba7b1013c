//! What an inspected request body asks the upstream server to do: the
//! calls of a JSON-RPC or MCP body, the operation of a GraphQL request.
//!
//! Kept apart from the matchers because a body is parsed, not matched: the
//! parser decides what the request is (and refuses what a server could read
//! differently), then the endpoint's rules judge it with the patterns of
//! `matcher`. The analysis must never report less than the server would
//! run: anything it cannot read exactly is an error, and the proxy denies
//! on error.

pub mod graphql;
pub mod jsonrpc;
pub mod rewrite;
