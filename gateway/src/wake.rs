//! Who a change wakes. A long-poll waits on the topics its answer depends
//! on (`policy:NAME` for a bundle, `sandbox:ID` for a status, `exec:ID`
//! for a command's output, `execs:ID` for a sandbox's queue) and is woken
//! only by a change to one of them: a status report wakes the waiters of
//! its own sandbox, not every waiter of the process, each of which would
//! read the database again to find nothing new.
//!
//! A topic exists while someone waits on it. [`Wakeups::wake_all`] is for
//! when changes may have been missed (a lost `LISTEN` connection) and for
//! shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// The topic of a policy's active revision.
#[must_use]
pub(crate) fn policy(name: &str) -> String {
    format!("policy:{name}")
}

/// The topic of a sandbox's row (its reports, its tokens, its removal).
#[must_use]
pub(crate) fn sandbox(id: &str) -> String {
    format!("sandbox:{id}")
}

/// The topic of one exec's record and output: its output long-polls
/// wait on it, and a chunk, the claim or the end wakes them.
#[must_use]
pub(crate) fn exec(id: &str) -> String {
    format!("exec:{id}")
}

/// The topic of a sandbox's queue of execs: its supervisor's
/// `execs/next` waits on it, and a new exec wakes it.
#[must_use]
pub(crate) fn execs(sandbox: &str) -> String {
    format!("execs:{sandbox}")
}

#[derive(Debug)]
pub struct Wakeups {
    topics: Mutex<HashMap<String, watch::Sender<u64>>>,
    all: watch::Sender<u64>,
}

impl Default for Wakeups {
    fn default() -> Self {
        Self {
            topics: Mutex::default(),
            all: watch::channel(0).0,
        }
    }
}

fn bump(tx: &watch::Sender<u64>) {
    tx.send_modify(|n| *n = n.wrapping_add(1));
}

impl Wakeups {
    /// A waiter for `topics`. Subscribe before reading the state the wait
    /// is about, so that a change committed in between still wakes it.
    #[must_use]
    pub(crate) fn subscribe(self: &Arc<Self>, topics: &[String]) -> Waiter {
        let mut map = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let receivers = topics
            .iter()
            .map(|t| {
                map.entry(t.clone())
                    .or_insert_with(|| watch::channel(0).0)
                    .subscribe()
            })
            .collect();
        Waiter {
            wakeups: Arc::clone(self),
            topics: topics.to_vec(),
            receivers,
            all: self.all.subscribe(),
        }
    }

    /// Wakes the waiters of one topic.
    pub(crate) fn wake(&self, topic: &str) {
        let map = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = map.get(topic) {
            bump(tx);
        }
    }

    /// Wakes every waiter.
    pub(crate) fn wake_all(&self) {
        bump(&self.all);
    }

    /// Long-polls waiting now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.all.receiver_count()
    }

    /// Topics someone waits on.
    #[must_use]
    pub(crate) fn topics(&self) -> usize {
        self.topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// One long-poll's subscription.
pub(crate) struct Waiter {
    wakeups: Arc<Wakeups>,
    topics: Vec<String>,
    receivers: Vec<watch::Receiver<u64>>,
    all: watch::Receiver<u64>,
}

impl Waiter {
    /// Forgets the changes seen so far: call it before each read of the
    /// state, then [`Waiter::changed`] returns on the next change only.
    pub(crate) fn mark_seen(&mut self) {
        self.all.borrow_and_update();
        for r in &mut self.receivers {
            r.borrow_and_update();
        }
    }

    /// Returns at the first change of a topic, or a wake-all.
    pub(crate) async fn changed(&mut self) {
        // A sender lives as long as a receiver does (the map keeps it), so
        // `changed` only fails once the gateway itself is gone.
        let mut waits: Vec<_> = self
            .receivers
            .iter_mut()
            .map(|r| Box::pin(r.changed()))
            .collect();
        let any = std::future::poll_fn(|cx| {
            for w in &mut waits {
                if w.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
            }
            std::task::Poll::Pending
        });
        tokio::select! {
            _ = self.all.changed() => {}
            () = any => {}
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.receivers.clear();
        let mut map = self
            .wakeups
            .topics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for t in &self.topics {
            if map.get(t).is_some_and(|tx| tx.receiver_count() == 0) {
                map.remove(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_change_wakes_its_own_topic_only() {
        let w = Arc::new(Wakeups::default());
        let mut a = w.subscribe(&[sandbox("a")]);
        let mut b = w.subscribe(&[sandbox("b"), policy("p")]);
        a.mark_seen();
        b.mark_seen();
        w.wake(&sandbox("a"));
        tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .unwrap();
        let slept = tokio::time::timeout(Duration::from_millis(50), b.changed()).await;
        assert!(slept.is_err(), "b was woken by a's topic");
        w.wake(&policy("p"));
        tokio::time::timeout(Duration::from_secs(5), b.changed())
            .await
            .unwrap();
        w.wake_all();
        a.mark_seen();
        let after_seen = tokio::time::timeout(Duration::from_millis(50), a.changed()).await;
        assert!(after_seen.is_err(), "a change seen before wakes again");
    }

    #[tokio::test]
    async fn a_topic_lives_as_long_as_its_waiters() {
        let w = Arc::new(Wakeups::default());
        let a = w.subscribe(&[sandbox("a")]);
        let b = w.subscribe(&[sandbox("a")]);
        assert_eq!((w.topics(), w.waiting()), (1, 2));
        drop(a);
        assert_eq!((w.topics(), w.waiting()), (1, 1));
        drop(b);
        assert_eq!((w.topics(), w.waiting()), (0, 0));
        // Waking a topic nobody waits on is a no-op, not a new topic.
        w.wake(&sandbox("a"));
        assert_eq!(w.topics(), 0);
    }
}
