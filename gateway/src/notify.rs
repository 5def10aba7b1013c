//! Across gateway processes on one PostgreSQL: every approval, status
//! report, phase change and exec write (a new exec, its claim, a chunk of
//! its output, its end) sends `NOTIFY` in its transaction (see the
//! store), and each process listens and wakes its own long-polls on the
//! topic named in the payload: a client waiting on one replica for output
//! another replica stored is woken when it commits. A lost
//! listening connection is opened again, and every waiter is woken then,
//! since a change may have been missed.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;

use crate::app::App;
use crate::store::StoreError;
use crate::store::sql::CHANNEL;

/// Starts listening; returns once the first `LISTEN` is in place, so that
/// no change committed after `start` returns can be missed.
pub(crate) async fn listen(app: Arc<App>, url: String) -> Result<(), StoreError> {
    let mut listener = PgListener::connect(&url).await?;
    listener.listen(CHANNEL).await?;
    tokio::spawn(async move {
        loop {
            match listener.try_recv().await {
                // The payload is the topic (`policy:NAME`, `sandbox:ID`,
                // `exec:ID`, `execs:ID`).
                Ok(Some(n)) => app.changed(n.payload()),
                // The connection was lost and changes may have been
                // missed; the next call reconnects.
                Ok(None) => app.wakeups.wake_all(),
                Err(e) => {
                    eprintln!("openshell-gateway: LISTEN {CHANNEL}: {e}; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    app.wakeups.wake_all();
                }
            }
        }
    });
    Ok(())
}
