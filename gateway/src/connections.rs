//! The client connections open, in all and per address: each accepted
//! connection holds a [`Slot`], and its drop gives the place back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The connections open, in all and per address.
#[derive(Debug, Default)]
pub(crate) struct Connections {
    open: AtomicUsize,
    per_peer: Mutex<HashMap<IpAddr, usize>>,
    changed: tokio::sync::Notify,
}

/// One open connection; its drop releases its place.
pub(crate) struct Slot {
    connections: Arc<Connections>,
    peer: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let c = &self.connections;
        {
            let mut map = c.per_peer.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(n) = map.get_mut(&self.peer) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&self.peer);
                }
            }
        }
        c.open.fetch_sub(1, Ordering::AcqRel);
        c.changed.notify_waiters();
    }
}

impl Connections {
    /// How many are open now.
    #[must_use]
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Resolves when a connection closes; take it before reading
    /// [`open`](Self::open), so a close in between is not missed.
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// A place for a connection from `peer`, or `None` over a limit.
    pub(crate) fn take(
        connections: &Arc<Connections>,
        peer: IpAddr,
        max: usize,
        max_per_peer: usize,
    ) -> Option<Slot> {
        let c = connections;
        let mut map = c.per_peer.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = map.get(&peer).copied().unwrap_or(0);
        if mine >= max_per_peer || c.open.load(Ordering::Acquire) >= max {
            return None;
        }
        map.insert(peer, mine + 1);
        c.open.fetch_add(1, Ordering::AcqRel);
        Some(Slot {
            connections: Arc::clone(connections),
            peer,
        })
    }
}
