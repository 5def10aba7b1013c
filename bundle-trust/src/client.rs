//! A small HTTPS client for the gateway's JSON API: one connection per
//! request, TLS verified against the gateway's CA only, a bearer token.
//! The supervisor and `openshell-gateway`'s client commands both use it.
//!
//! A client may know several replicas of the gateway ([`Client::with_urls`]):
//! every request tries them in the order given and moves to the next when
//! one cannot be reached, does not answer in time or answers `5xx` (the
//! replicas share one database, so any of them answers for all). A `4xx`
//! is the gateway's answer, the same from every replica, and is returned
//! at once.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

/// Why no answer came back. An HTTP error status is not one: it is a
/// [`Response`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The URL as given; empty when none was.
    #[error("`{0}` is not a gateway URL (`https://HOST:PORT`)")]
    Url(String),
    /// No PEM certificate in the CA file, or one rustls refuses.
    #[error("the gateway CA file is not valid: {0}")]
    Ca(String),
    /// TCP, TLS or HTTP failed with this replica; from [`Client::send`],
    /// only once every replica failed.
    #[error("cannot reach the gateway at `{url}`: {why}")]
    Unreachable {
        /// The replica's URL.
        url: String,
        /// The underlying error's message.
        why: String,
    },
    /// A replica's exchange took longer than the `timeout` given to
    /// [`Client::send`].
    #[error("the gateway did not answer within {0:?}")]
    Timeout(Duration),
    /// The request could not be built (a method or header that is not
    /// valid HTTP).
    #[error("the request could not be sent: {0}")]
    Request(String),
}

/// A response: status, the headers the API uses, the body.
#[derive(Debug, Clone)]
pub struct Response {
    /// Any status, `4xx` and `5xx` included: the caller decides.
    pub status: u16,
    /// The `ETag` header; for a bundle, the gateway sends its quoted
    /// digest.
    pub etag: Option<String>,
    /// The whole body, read before returning.
    pub body: Bytes,
}

impl Response {
    /// The body as JSON (`null` when it is not JSON).
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// The most a connection (TCP and TLS) may take before the next replica is
/// tried, so that one silent replica does not use up a request's time.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One replica's address.
#[derive(Debug, Clone)]
struct Endpoint {
    host: String,
    port: u16,
    url: String,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Self, ClientError> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| ClientError::Url(url.to_owned()))?
            .trim_end_matches('/');
        let (host, port) = rest
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .unwrap_or((rest, 443));
        if host.is_empty() || host.contains('/') {
            return Err(ClientError::Url(url.to_owned()));
        }
        Ok(Self {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port,
            url: url.trim_end_matches('/').to_owned(),
        })
    }
}

/// The gateway's addresses (one or several replicas), its CA and a token.
#[derive(Clone)]
pub struct Client {
    /// Never empty.
    endpoints: Vec<Endpoint>,
    token: String,
    tls: TlsConnector,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("urls", &self.urls().collect::<Vec<_>>())
            .finish()
    }
}

impl Client {
    /// `url` is `https://HOST:PORT`; `ca_pem` the gateway's CA certificate.
    pub fn new(url: &str, ca_pem: &[u8], token: &str) -> Result<Self, ClientError> {
        Self::with_urls(&[url], ca_pem, token)
    }

    /// A client of several replicas of one gateway (same CA, same
    /// database), tried in this order by every request; see the module's
    /// documentation for when the next one is tried.
    pub fn with_urls<S: AsRef<str>>(
        urls: &[S],
        ca_pem: &[u8],
        token: &str,
    ) -> Result<Self, ClientError> {
        let endpoints = urls
            .iter()
            .map(|u| Endpoint::parse(u.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err(ClientError::Url(String::new()));
        }
        let mut roots = rustls::RootCertStore::empty();
        let mut any = false;
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(|e| ClientError::Ca(e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| ClientError::Ca(e.to_string()))?;
            any = true;
        }
        if !any {
            return Err(ClientError::Ca("it holds no PEM certificate".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Ca(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            endpoints,
            token: bearer_token(token),
            tls: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The first URL, the one tried first.
    #[must_use]
    pub fn url(&self) -> &str {
        self.endpoints.first().map_or("", |e| e.url.as_str())
    }

    /// Every URL, in the order they are tried.
    pub(crate) fn urls(&self) -> impl Iterator<Item = &str> {
        self.endpoints.iter().map(|e| e.url.as_str())
    }

    /// The same gateway with another token.
    #[must_use]
    pub fn with_token(&self, token: &str) -> Self {
        let mut c = self.clone();
        token.trim().clone_into(&mut c.token);
        c
    }

    /// Sends one request; `body` is JSON when given. `headers` are extra
    /// `(name, value)` pairs. Each replica's exchange is bounded by
    /// `timeout`. When every replica fails, the last `5xx` answer is
    /// returned if there was one, else the last error.
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let mut failed: Option<Result<Response, ClientError>> = None;
        for endpoint in &self.endpoints {
            let tried = tokio::time::timeout(
                timeout,
                self.exchange(endpoint, method, path, body, headers, timeout),
            )
            .await
            .map_err(|_| ClientError::Timeout(timeout))
            .and_then(|r| r);
            match tried {
                Ok(r) if r.status >= 500 => failed = Some(Ok(r)),
                Ok(r) => return Ok(r),
                Err(e @ (ClientError::Unreachable { .. } | ClientError::Timeout(_))) => {
                    // A 5xx from an earlier replica says more than this.
                    if !matches!(failed, Some(Ok(_))) {
                        failed = Some(Err(e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        failed.unwrap_or_else(|| Err(ClientError::Url(String::new())))
    }

    async fn exchange(
        &self,
        at: &Endpoint,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<Response, ClientError> {
        let unreachable = |why: String| ClientError::Unreachable {
            url: at.url.clone(),
            why,
        };
        let name = ServerName::try_from(at.host.clone())
            .map_err(|e| ClientError::Url(format!("{}: {e}", at.url)))?;
        let limit = timeout.min(CONNECT_TIMEOUT);
        let connect = async {
            let tcp = tokio::net::TcpStream::connect((at.host.as_str(), at.port))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
            let _ = tcp.set_nodelay(true);
            self.tls
                .connect(name, tcp)
                .await
                .map_err(|e| unreachable(format!("TLS: {e}")))
        };
        let tls = tokio::time::timeout(limit, connect)
            .await
            .map_err(|_| unreachable(format!("no connection within {limit:?}")))??;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("{}:{}", at.host, at.port))
            .header("authorization", format!("Bearer {}", self.token));
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req
            .body(Full::new(bytes))
            .map_err(|e| ClientError::Request(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = resp.status().as_u16();
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        Ok(Response { status, etag, body })
    }
}

/// The bearer token in a token file: the token alone, or the JSON object
/// `token create` and `sandbox create` print (`{"token": ...}`), so their
/// output can be saved and used as it is.
fn bearer_token(text: &str) -> String {
    let text = text.trim();
    if text.starts_with('{')
        && let Ok(serde_json::Value::Object(o)) = serde_json::from_str(text)
        && let Some(serde_json::Value::String(t)) = o.get("token")
    {
        return t.clone();
    }
    text.to_owned()
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn a_token_file_holds_the_token_or_what_token_create_printed() {
        assert_eq!(bearer_token("osg_abc\n"), "osg_abc");
        assert_eq!(
            bearer_token(
                "{\n  \"name\": \"alice\",\n  \"role\": \"author\",\n  \"token\": \"osg_abc\"\n}\n"
            ),
            "osg_abc"
        );
        assert_eq!(bearer_token("{not json"), "{not json");
    }
}
