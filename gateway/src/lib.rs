//! `openshell-gateway`: the control plane. A change to a policy is
//! proposed, compiled (policy-lang) and proved against what is live
//! (prover, in process), approved by a person (or automatically when the
//! prover shows no new access), signed (Ed25519, see `bundle-trust`) and
//! delivered by long-poll to every supervisor running that policy, which
//! reports what it applied.
//!
//! ```text
//! author ──propose──▶ api ──▶ propose (compile, prove, review token)
//!                      │──▶ store (SQLite | PostgreSQL; compare-and-swap)
//!                      │──▶ audit (hash chain)
//! supervisor ◀─ bundle (long-poll, If-None-Match) ◀─ changes (watch; NOTIFY)
//! supervisor ── status ──▶ api
//! ```
//!
//! Modules: [`cli`] (the command line), [`dir`] (certificates, keys,
//! tokens on disk), [`server`] (TLS, HTTP, authentication, errors),
//! [`api`] (the `/v1` routes), `propose` (compile and prove), `contain`
//! (what a proof within a policy's boundary decides), `auto`
//! (what `--approval auto` leaves to a person), [`secret_sources`]
//! (`--allow-secret-source`),
//! [`store`] (the database), `audit` (the hash chain), `notify`
//! (Postgres `LISTEN`), `wire` (every JSON body, shared by the server
//! and the client commands), [`openapi`] (the API document, generated
//! from `wire`). `docs/gateway.md` is the operator's guide.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod advise;
pub mod api;
pub mod app;
mod audit;
mod auto;
pub mod cli;
mod clock;
mod connections;
mod contain;
pub mod dir;
pub mod driver;
mod http_errors;
mod lifecycle;
pub mod metrics;
mod notify;
pub mod openapi;
mod propose;
pub mod secret_sources;
pub mod server;
mod show;
pub mod store;
mod wake;
mod wire;
