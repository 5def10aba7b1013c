//! Command-line definitions.

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use sandbox_protocol::channel::Endpoint;

#[derive(Parser, Debug)]
#[command(
    name = "openshell-supervisor",
    version,
    about = "Run a command under a compiled policy bundle: Landlock, a seccomp connect broker, a DNS stub and a deny log"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command in a sandbox that enforces a bundle.
    Run(RunArgs),
    /// Supervise a sandbox on another host: write its bootstrap, attach to
    /// it over TCP and TLS, and serve it until it closes the channel.
    Serve(ServeArgs),
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The bundle, or the gateway's for sandbox `--sandbox-id`, followed
    /// as `run --gateway` follows it.
    #[command(flatten)]
    pub source: BundleSource,

    /// Where the sandbox listens, as this host reaches it: `IP:PORT`, or
    /// `unix:/absolute/path`, a socket in a directory both hosts see (a
    /// workload container with no network).
    #[arg(long, value_name = "IP:PORT|unix:PATH")]
    pub sandbox: Endpoint,

    /// Where the sandbox listens, as it names it (default: 0.0.0.0 and the
    /// port of `--sandbox`; the same path for `unix:`).
    #[arg(long, value_name = "IP:PORT|unix:PATH")]
    pub sandbox_listen: Option<Endpoint>,

    /// The sandbox's id, bound into every message and its channel keys.
    #[arg(long, value_name = "ID")]
    pub sandbox_id: String,

    /// The sandbox's generation: new keys, and a new number, at every
    /// start.
    #[arg(long, value_name = "N")]
    pub generation: u64,

    /// Write the sandbox's bootstrap here (a new file, mode 0600), for
    /// `openshell-sandbox --bootstrap`.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "credential",
        conflicts_with = "credential"
    )]
    pub bootstrap: Option<PathBuf>,

    /// Attach with this channel credential instead: the supervisor's half
    /// of a kit whose other half, the sandbox's bootstrap, whoever starts
    /// the sandbox made (a driver). No keys are made and no bootstrap is
    /// written; the launch goes to the sandbox in the greeting. The file
    /// is read, not deleted (it may be on a read-only volume).
    #[arg(long, value_name = "FILE")]
    pub credential: Option<PathBuf>,

    /// Make FILE once the sandbox's evidence is accepted and its workload
    /// runs (for a driver waiting on it).
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,

    /// How long to keep trying while the sandbox does not listen yet.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub attach_within: u64,

    /// When the channel drops, how long the sandbox keeps the workload
    /// frozen waiting for this supervisor to attach again before it kills
    /// it; also how long this process tries.
    #[arg(long, value_name = "SECS", default_value_t = sandbox::standalone::REATTACH_WITHIN)]
    pub reattach_within: u64,

    /// End the workload after SECS seconds, as a `SIGTERM` would (exit
    /// status 124).
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,

    /// The workload's working directory on the sandbox's host (absolute),
    /// and what `workdir` rules grant.
    #[arg(long, value_name = "DIR")]
    pub workdir: PathBuf,

    /// The directory the sandbox creates for the workload's trust file.
    #[arg(long, value_name = "DIR", default_value = "/tmp/openshell-trust")]
    pub trust_dir: PathBuf,

    #[command(flatten)]
    pub supervision: SupervisionArgs,

    /// The command (its program an absolute path on the sandbox's host)
    /// and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Where the bundle comes from: a file, or a gateway that delivers it.
#[derive(clap::Args, Debug, Default)]
pub struct BundleSource {
    /// The compiled bundle (`openshell-policy compile`).
    #[arg(
        long,
        value_name = "BUNDLE",
        required_unless_present = "gateway",
        conflicts_with = "gateway"
    )]
    pub bundle: Option<PathBuf>,

    /// Fetch the bundle from this gateway (`https://HOST:PORT`) instead:
    /// verified before the launch (unreachable or refused: the command
    /// never runs), then each approved revision is applied as it comes.
    /// Several replicas: repeat the flag or separate the URLs with commas;
    /// they are tried in order, the next when one is unreachable or
    /// answers 5xx.
    #[arg(
        long,
        value_name = "URL",
        value_delimiter = ',',
        requires_all = ["token_file", "gateway_ca", "trust_key"],
        conflicts_with = "watch"
    )]
    pub gateway: Vec<String>,

    /// Where the highest revision applied per sandbox is kept, so that a
    /// restarted supervisor refuses an older one (default:
    /// /var/lib/openshell-supervisor). The supervisor's own, out of the
    /// workload's reach.
    #[arg(long, value_name = "DIR", requires = "gateway")]
    pub state_dir: Option<PathBuf>,

    /// At launch, refuse an envelope issued more than SECS seconds ago,
    /// unless it signs the nonce this launch sent (default: 300).
    #[arg(long, value_name = "SECS", requires = "gateway")]
    pub max_bundle_age: Option<u64>,

    /// The sandbox's token (`openshell-gateway sandbox create`), or the
    /// session a driver wrote, which the supervisor refreshes and writes
    /// back.
    #[arg(long, value_name = "FILE", requires = "gateway")]
    pub token_file: Option<PathBuf>,

    /// The gateway's CA certificate.
    #[arg(long, value_name = "FILE", requires = "gateway")]
    pub gateway_ca: Option<PathBuf>,

    /// The signing keys to trust (the gateway's `trust.keys`); read again
    /// for every bundle, so a new key is trusted without a restart.
    #[arg(long, value_name = "FILE", requires = "gateway")]
    pub trust_key: Option<PathBuf>,
}

/// Where the workload's network namespace comes from.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetnsMode {
    /// A new namespace with only loopback (needs root or `CAP_SYS_ADMIN`).
    New,
    /// The supervisor's own namespace; every connect is still brokered.
    None,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub source: BundleSource,

    /// The sandbox's id at the gateway.
    #[arg(long, value_name = "ID", requires = "gateway")]
    pub sandbox: Option<String>,

    /// The workload's working directory, and what `workdir` rules grant
    /// (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,

    #[command(flatten)]
    pub supervision: SupervisionArgs,

    /// Kill the workload after SECS seconds (exit status 124).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,

    /// Also write the workload's stdout and stderr to FILE.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,

    /// `new`: a namespace with only loopback; `none`: share this one.
    /// Default: `new` when the supervisor may create one, else `none`.
    #[arg(long, value_enum, value_name = "new|none")]
    pub netns: Option<NetnsMode>,

    /// Print what the supervisor sets up, and how long it took.
    #[arg(long, short)]
    pub verbose: bool,

    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// What supervising a workload takes, in `run` and `serve` alike: how
/// its names resolve, where the deny log goes, its environment, the
/// upstream trust and reloads.
#[derive(clap::Args, Debug)]
pub struct SupervisionArgs {
    /// Answer DNS for HOST with IP without asking upstream; also names IP
    /// for HOST, so a rule for HOST reaches it even if it is internal.
    #[arg(long = "resolve", value_name = "HOST=IP", value_parser = parse_resolve)]
    pub resolve: Vec<(String, IpAddr)>,

    /// The upstream DNS server (default: the host's `/etc/resolv.conf`).
    #[arg(long, value_name = "IP:PORT")]
    pub dns_upstream: Option<SocketAddr>,

    /// Append the deny log (JSON lines) to FILE instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,

    /// Give the workload NAME=VALUE, or NAME with the supervisor's value.
    /// The only way environment reaches the workload.
    #[arg(long = "env", value_name = "NAME[=VALUE]", value_parser = parse_env)]
    pub env: Vec<EnvArg>,

    /// Also trust this CA (PEM) when the L7 proxy verifies the real server
    /// behind an inspected HTTPS route (default: the system roots only).
    #[arg(long, value_name = "FILE")]
    pub upstream_ca: Option<PathBuf>,

    /// Reload the bundle's network, L7 and credential rules whenever the
    /// bundle file changes (`SIGHUP` always reloads).
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvArg {
    pub name: String,
    /// `None`: pass the supervisor's own value, if it has one.
    pub value: Option<OsString>,
}

fn parse_resolve(text: &str) -> Result<(String, IpAddr), String> {
    let (host, ip) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not HOST=IP"))?;
    let host = policy_bundle::matcher::normalize_host(host)
        .map_err(|e| format!("`{host}` is not a host name: {}", e.message))?;
    let ip = ip
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .map_err(|_| format!("`{ip}` is not an IP address"))?;
    Ok((host, ip))
}

fn parse_env(text: &str) -> Result<EnvArg, String> {
    let (name, value) = match text.split_once('=') {
        Some((n, v)) => (n, Some(OsString::from(v))),
        None => (text, None),
    };
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!("`{name}` is not an environment variable name"));
    }
    Ok(EnvArg {
        name: name.to_owned(),
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_and_env_arguments_parse() {
        assert_eq!(
            parse_resolve("API.Example.com.=::ffff:127.0.0.1").unwrap(),
            (
                "api.example.com".to_owned(),
                "::ffff:127.0.0.1".parse().unwrap()
            )
        );
        assert_eq!(
            parse_resolve("h=[::1]").unwrap().1,
            "::1".parse::<IpAddr>().unwrap()
        );
        assert!(parse_resolve("nohost").is_err());
        assert!(parse_resolve("h=not-an-ip").is_err());
        assert_eq!(
            parse_env("A_1=x=y").unwrap(),
            EnvArg {
                name: "A_1".into(),
                value: Some("x=y".into())
            }
        );
        assert_eq!(parse_env("HOME").unwrap().value, None);
        assert!(parse_env("1A=x").is_err());
        assert!(parse_env("A-B").is_err());
        assert!(parse_env("=x").is_err());
    }
}
