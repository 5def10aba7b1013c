//! The supervisor's token for the gateway, kept fresh when it is a
//! session. A sandbox the gateway runs gets a short-lived session token:
//! its driver writes the token file as the gateway answers a refresh
//! (`{"id", "generation", "token", "expires_at"}`). Then the supervisor
//! refreshes it at half its remaining life, on whichever gateway answers,
//! and writes each new one back to the file (a restarted supervisor starts
//! from the newest). A plain token, or one without `expires_at`, is used
//! as it is for as long as it works.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use bundle_trust::client::Client;
use serde::{Deserialize, Serialize};

use crate::notes::note;

/// The longest a failed refresh waits before the next try.
const MAX_RETRY: Duration = Duration::from_secs(10);

/// A token file that holds a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionFile {
    pub id: String,
    pub generation: i64,
    pub token: String,
    pub expires_at: i64,
}

impl SessionFile {
    /// `None` for a plain token, or JSON that is not a session.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text.trim()).ok()
    }
}

/// The client every request goes through, and the session it refreshes.
#[derive(Debug)]
pub struct Session {
    client: RwLock<Client>,
    sandbox: String,
    file: PathBuf,
    /// `None`: a plain token, never refreshed.
    current: RwLock<Option<SessionFile>>,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Writes `text` to `path` whole or not at all: a file beside it, then a
/// rename over it; owner-only, as a token file must be.
fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

impl Session {
    /// `client` carries the file's token; `text` is what the file held.
    #[must_use]
    pub fn new(client: Client, sandbox: &str, file: &Path, text: &str) -> Arc<Self> {
        Arc::new(Self {
            client: RwLock::new(client),
            sandbox: sandbox.to_owned(),
            file: file.to_owned(),
            current: RwLock::new(SessionFile::parse(text).filter(|s| s.id == sandbox)),
        })
    }

    /// The client with the newest token.
    #[must_use]
    pub fn client(&self) -> Client {
        self.client
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn current(&self) -> Option<SessionFile> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Refreshes the session before it expires, for as long as the runtime
    /// lives; returns at once for a plain token, and once the gateway says
    /// the session is revoked (the sandbox stopped).
    pub async fn keep_fresh(self: Arc<Self>) {
        let mut retry = Duration::from_secs(1);
        let mut lost = false;
        loop {
            let Some(session) = self.current() else {
                return;
            };
            let left = session.expires_at.saturating_sub(now()).max(0);
            let wait = u64::try_from(left / 2).unwrap_or(0).max(1);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            loop {
                match self.refresh().await {
                    Ok(()) => {
                        retry = Duration::from_secs(1);
                        lost = false;
                        break;
                    }
                    Err(Refusal::Revoked(why)) => {
                        note(&format!("the gateway ended this sandbox's session: {why}"));
                        return;
                    }
                    Err(Refusal::Failed(why)) => {
                        let expired = self.current().is_none_or(|s| s.expires_at <= now());
                        if expired && !lost {
                            note(&format!(
                                "the session expired before it could be refreshed ({why}); the gateway refuses this supervisor's requests until it is restarted with a new session"
                            ));
                            lost = true;
                        } else if !expired {
                            note(&format!("cannot refresh the session yet: {why}; retrying"));
                        }
                        tokio::time::sleep(retry).await;
                        retry = (retry * 2).min(MAX_RETRY);
                    }
                }
            }
        }
    }

    async fn refresh(&self) -> Result<(), Refusal> {
        let path = format!("/v1/sandboxes/{}/session", self.sandbox);
        let resp = self
            .client()
            .send("POST", &path, None, &[], Duration::from_secs(30))
            .await
            .map_err(|e| Refusal::Failed(e.to_string()))?;
        let answer = resp.json();
        if resp.status != 201 {
            let why = answer
                .pointer("/error/message")
                .and_then(serde_json::Value::as_str)
                .map_or_else(|| format!("status {}", resp.status), str::to_owned);
            let code = answer
                .pointer("/error/code")
                .and_then(serde_json::Value::as_str);
            return Err(if code == Some("session_revoked") {
                Refusal::Revoked(why)
            } else {
                Refusal::Failed(format!("the gateway answered {}: {why}", resp.status))
            });
        }
        let fresh: SessionFile = serde_json::from_value(answer)
            .map_err(|e| Refusal::Failed(format!("the gateway's answer is not a session: {e}")))?;
        let text = serde_json::to_string_pretty(&fresh).unwrap_or_default();
        if let Err(e) = replace_file(&self.file, &text) {
            note(&format!(
                "cannot write the refreshed session to `{}`: {e}; a restart would start from the older one",
                self.file.display()
            ));
        }
        let client = self.client().with_token(&fresh.token);
        *self.client.write().unwrap_or_else(PoisonError::into_inner) = client;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Some(fresh);
        Ok(())
    }
}

enum Refusal {
    /// The sandbox stopped or started another generation.
    Revoked(String),
    /// The gateway did not answer, or refused otherwise; worth another try.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::SessionFile;

    #[test]
    fn a_session_file_is_told_from_a_plain_token() {
        let s = SessionFile::parse(
            "{\"id\": \"sb\", \"generation\": 2, \"token\": \"osg_x\", \"expires_at\": 99}\n",
        );
        assert_eq!(
            s,
            Some(SessionFile {
                id: "sb".into(),
                generation: 2,
                token: "osg_x".into(),
                expires_at: 99
            })
        );
        assert_eq!(SessionFile::parse("osg_x\n"), None);
        assert_eq!(SessionFile::parse("{\"token\": \"osg_x\"}"), None);
    }
}
