//! Reading L7 request bodies that rules judge: JSON-RPC and MCP calls.
//!
//! Kept apart from the matchers because a body is parsed, not matched: the
//! parser decides what the calls are (and refuses what a server could read
//! differently), then the endpoint's rules judge each call by name.

pub mod jsonrpc;
