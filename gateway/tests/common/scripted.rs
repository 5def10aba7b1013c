//! A driver whose every call can be made to fail or hang, for the
//! gateway's own tests of what it does around a driver; the real drivers
//! have suites of their own.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use gateway::driver::{Driver, DriverError, DriverFut, Launch};

#[derive(Default)]
pub struct State {
    /// Sandbox id → generation running.
    pub running: BTreeMap<String, i64>,
    /// Sandboxes the driver made something for.
    pub made: BTreeSet<String>,
    /// Every launch's token, in order.
    pub tokens: Vec<(String, i64, String)>,
    pub calls: Vec<String>,
    pub fail: BTreeSet<&'static str>,
    /// Calls (`stop s1`) that wait until released.
    pub hang: BTreeSet<String>,
}

/// A driver whose every call can be made to fail or hang.
#[derive(Default)]
pub struct Scripted {
    pub state: Mutex<State>,
    released: tokio::sync::Notify,
    /// Where it says its sandboxes live (default: its name).
    place: Option<String>,
}

impl Scripted {
    /// A driver whose sandboxes live at `place`.
    pub fn at(place: &str) -> Self {
        Self {
            place: Some(place.to_owned()),
            ..Self::default()
        }
    }

    pub fn fail(&self, step: &'static str, on: bool) {
        let mut s = self.state.lock().unwrap();
        if on {
            s.fail.insert(step);
        } else {
            s.fail.remove(step);
        }
    }

    pub fn hang(&self, call: &str, on: bool) {
        let mut s = self.state.lock().unwrap();
        if on {
            s.hang.insert(call.to_owned());
        } else {
            s.hang.remove(call);
        }
        drop(s);
        self.released.notify_waiters();
    }

    pub fn runs(&self, id: &str) -> Option<i64> {
        self.state.lock().unwrap().running.get(id).copied()
    }

    pub fn calls(&self) -> Vec<String> {
        self.state.lock().unwrap().calls.clone()
    }

    pub fn last_token(&self, id: &str) -> (i64, String) {
        let s = self.state.lock().unwrap();
        let (_, g, t) = s.tokens.iter().rev().find(|(i, _, _)| i == id).unwrap();
        (*g, t.clone())
    }

    async fn step(&self, step: &'static str, id: &str) -> Result<(), DriverError> {
        let call = format!("{step} {id}");
        self.state.lock().unwrap().calls.push(call.clone());
        loop {
            let released = self.released.notified();
            if !self.state.lock().unwrap().hang.contains(&call) {
                break;
            }
            released.await;
        }
        if self.state.lock().unwrap().fail.contains(step) {
            return Err(DriverError(format!("{step} refused by the script")));
        }
        Ok(())
    }
}

impl Driver for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn place(&self) -> String {
        self.place.clone().unwrap_or_else(|| "scripted".to_owned())
    }

    fn start(&self, l: Launch) -> DriverFut<'_, ()> {
        Box::pin(async move {
            self.step("start", &l.id).await?;
            let mut s = self.state.lock().unwrap();
            s.running.insert(l.id.clone(), l.generation);
            s.made.insert(l.id.clone());
            s.tokens.push((l.id, l.generation, l.token));
            Ok(())
        })
    }

    fn running(&self, id: &str) -> DriverFut<'_, bool> {
        let id = id.to_owned();
        Box::pin(async move {
            self.step("running", &id).await?;
            Ok(self.state.lock().unwrap().running.contains_key(&id))
        })
    }

    fn stop(&self, id: &str) -> DriverFut<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            self.step("stop", &id).await?;
            self.state.lock().unwrap().running.remove(&id);
            Ok(())
        })
    }

    fn remove(&self, id: &str) -> DriverFut<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move {
            self.step("remove", &id).await?;
            self.state.lock().unwrap().made.remove(&id);
            Ok(())
        })
    }
}
