//! The one matcher module: every pattern in a policy has exactly one meaning,
//! defined here.
//!
//! The compiler, the L7 proxy, the seccomp connect decision, the reference
//! evaluator and the prover all call into this module, so the prover reasons
//! about exactly what enforcement does. Each pattern type has a parser with
//! precise errors, a direct matcher (`matches`), a regex (`to_regex`, used
//! as a full match `^(?:...)$`) that accepts exactly the same inputs, for
//! the prover's automata, and a canonical `Display` that parses back to an
//! equal pattern (and is what serde stores). `docs/matching.md` explains the
//! semantics for policy authors.

mod binary;
mod canon;
mod dotted;
mod error;
mod glob;
pub mod graphql;
mod host;
mod http_path;
pub mod method;
pub mod net;
pub mod overrides;
#[cfg(test)]
pub(crate) mod proptests;
mod query;
mod rpc_method;
mod segments;
mod serde_str;
mod tool;

pub use binary::BinaryGlob;
pub use canon::{CanonError, CanonicalTarget, canonicalize_path};
pub use error::PatternError;
pub use graphql::{GRAPHQL_NAME_REGEX, GraphqlNameGlob, OperationType, OperationTypeSet};
pub use host::{HostPattern, normalize_host};
pub use http_path::{HttpPathGlob, RequestPath, fold_path};
pub use method::{EXTENSION_METHODS, Method, MethodSet, STANDARD_METHODS, WEBSOCKET_TEXT};
pub use net::{
    AddrSet, EndpointText, EndpointTextError, METADATA_HOSTS, PortSet, canonical_ip, classify_addr,
    internal_ranges, is_metadata_host, split_endpoint,
};
pub use query::{DOTTED_PREFIX, QueryMatcher, ValueGlob, parse_query_string};
pub use rpc_method::{RpcMethod, TOOLS_CALL};
pub use tool::ToolSet;

#[cfg(test)]
pub(crate) use dotted::DottedGlob;
pub(crate) use net::AddrClass;
