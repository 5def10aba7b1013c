//! Commands run in sandboxes the gateway runs, in SQL: the queue a
//! supervisor claims from and the transcript it writes to. Everything is
//! in the database, so any replica answers any of the requests, and a
//! gateway that restarts loses nothing.
//!
//! A claim is a compare-and-swap of `queued` → `running` that clears
//! `env` in the same statement: of two supervisors (or replicas) racing,
//! one changes the row and the other finds it claimed and takes the next.
//! Output and the end lock the command's row (PostgreSQL: `FOR UPDATE`;
//! SQLite writes one at a time anyway), so that the stored length of a
//! stream, which says where the next chunk starts, moves one chunk at a
//! time.

use std::collections::BTreeMap;

use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::{Dialect, SqlStore, append};
use crate::store::{
    AuditEntry, ClaimedExec, ExecEnd, ExecRow, ExecState, NewExec, OutputPiece, StoreError, Stream,
};

/// The commands. `seq` orders a sandbox's commands (oldest first for the
/// claim, newest first for the list); `env` is NULL once claimed;
/// `stored` counts the transcript's bytes kept, against the limit, and
/// `chunks` numbers the transcript's pieces in arrival order. Flags are
/// 0 or 1.
pub(super) const TABLE: &str = "CREATE TABLE IF NOT EXISTS execs (id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, generation BIGINT NOT NULL, seq BIGINT NOT NULL, command TEXT NOT NULL, env TEXT, env_names TEXT NOT NULL, workdir TEXT, timeout_seconds BIGINT, state TEXT NOT NULL, exit_status BIGINT, timed_out BIGINT NOT NULL, error TEXT, stdout_len BIGINT NOT NULL, stderr_len BIGINT NOT NULL, stored BIGINT NOT NULL, chunks BIGINT NOT NULL, truncated BIGINT NOT NULL, created_by TEXT NOT NULL, created_at BIGINT NOT NULL, started_at BIGINT, ended_at BIGINT)";
pub(super) const INDEX: &str =
    "CREATE INDEX IF NOT EXISTS execs_sandbox ON execs (sandbox, state, seq)";
/// The transcript: pieces of each stream that do not overlap, `offset`
/// the first byte's place in its stream, `seq` the order they came in.
pub(super) const OUTPUT: &str = "CREATE TABLE IF NOT EXISTS exec_output (exec TEXT NOT NULL, stream TEXT NOT NULL, \"offset\" BIGINT NOT NULL, data {BLOB} NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (exec, stream, \"offset\"))";
pub(super) const OUTPUT_INDEX: &str =
    "CREATE INDEX IF NOT EXISTS exec_output_seq ON exec_output (exec, seq)";

const COLUMNS: &str = "id, sandbox, generation, command, env_names, workdir, timeout_seconds, state, exit_status, timed_out, error, stdout_len, stderr_len, truncated, created_by, created_at, started_at, ended_at";

/// What a command that was still queued or running when its sandbox
/// left `ready` ends with.
pub(crate) const STOPPED: &str = "the sandbox stopped before the command ended";

/// The pieces past the asked offsets (`$2` stdout, `$3` stderr).
const AFTER: &str = "exec = $1 AND ((stream = 'stdout' AND \"offset\" + LENGTH(data) > $2) OR (stream = 'stderr' AND \"offset\" + LENGTH(data) > $3))";

/// Pieces looked at for one answer; many small ones make a short answer,
/// and the client asks again.
const PIECES_PER_ANSWER: i64 = 4096;

fn io(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("an exec's `{what}` does not read back: {e}"))
}

fn exec_row(r: &AnyRow) -> Result<ExecRow, StoreError> {
    let command: String = r.try_get("command")?;
    let names: String = r.try_get("env_names")?;
    let state: String = r.try_get("state")?;
    Ok(ExecRow {
        id: r.try_get("id")?,
        sandbox: r.try_get("sandbox")?,
        generation: r.try_get("generation")?,
        command: serde_json::from_str(&command).map_err(|e| io("command", e))?,
        env_names: serde_json::from_str(&names).map_err(|e| io("env_names", e))?,
        workdir: r.try_get("workdir")?,
        timeout_seconds: r.try_get("timeout_seconds")?,
        state: ExecState::parse(&state).ok_or_else(|| io("state", &state))?,
        exit_status: r.try_get("exit_status")?,
        timed_out: r.try_get::<i64, _>("timed_out")? != 0,
        error: r.try_get("error")?,
        stdout_len: r.try_get("stdout_len")?,
        stderr_len: r.try_get("stderr_len")?,
        truncated: r.try_get::<i64, _>("truncated")? != 0,
        created_by: r.try_get("created_by")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        ended_at: r.try_get("ended_at")?,
    })
}

fn to_json(what: &str, v: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Io(format!("an exec's `{what}`: {e}")))
}

/// Fails the sandbox's queued and running commands: it left `ready`
/// (the transition committing in `tx`), and no supervisor of it is left
/// to run them or to say how they ended. The number failed.
pub(super) async fn fail_open(
    tx: &mut Transaction<'static, Any>,
    sandbox: &str,
    now: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("UPDATE execs SET state = 'failed', error = $1, ended_at = $2, env = NULL WHERE sandbox = $3 AND state IN ('queued', 'running')")
        .bind(STOPPED)
        .bind(now)
        .bind(sandbox)
        .execute(&mut **tx)
        .await?
        .rows_affected())
}

/// Removes the sandbox's commands and their transcripts, with the
/// sandbox.
pub(super) async fn delete_all(
    tx: &mut Transaction<'static, Any>,
    sandbox: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM exec_output WHERE exec IN (SELECT id FROM execs WHERE sandbox = $1)")
        .bind(sandbox)
        .execute(&mut **tx)
        .await?;
    sqlx::query("DELETE FROM execs WHERE sandbox = $1")
        .bind(sandbox)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// What an ended command's row says about its end.
fn end_of(r: &AnyRow) -> Result<Option<ExecEnd>, StoreError> {
    let state: String = r.try_get("state")?;
    let error: Option<String> = r.try_get("error")?;
    let status: Option<i64> = r.try_get("exit_status")?;
    let timed_out = r.try_get::<i64, _>("timed_out")? != 0;
    Ok(match (ExecState::parse(&state), status) {
        (Some(ExecState::Exited), Some(status)) => Some(ExecEnd::Exited { status, timed_out }),
        (Some(ExecState::Failed), _) => Some(ExecEnd::Failed(error.unwrap_or_default())),
        _ => None,
    })
}

impl SqlStore {
    /// ` FOR UPDATE` where the database has it: the row stays locked to
    /// the end of the transaction.
    fn for_update(&self) -> &'static str {
        match self.dialect {
            Dialect::Postgres => " FOR UPDATE",
            Dialect::Sqlite => "",
        }
    }

    pub(super) async fn insert_exec(
        &self,
        e: NewExec,
        audit: AuditEntry,
    ) -> Result<(), StoreError> {
        let command = to_json("command", &e.command)?;
        let env = (!e.env.is_empty())
            .then(|| to_json("env", &e.env))
            .transpose()?;
        let names = to_json("env_names", &e.env.keys().collect::<Vec<_>>())?;
        let (_guard, mut tx) = self.begin().await?;
        // Takes the sandbox's row lock: a stop committing meanwhile
        // either comes first (and this finds the sandbox not ready) or
        // after (and fails this command with the others).
        let ready = sqlx::query("UPDATE sandboxes SET phase = phase WHERE id = $1 AND phase = 'ready' AND generation = $2")
            .bind(&e.sandbox)
            .bind(e.generation)
            .execute(&mut *tx)
            .await?;
        if ready.rows_affected() != 1 {
            return Err(StoreError::Conflict(format!(
                "sandbox `{}` left `ready` (or started another generation) meanwhile: it runs no command now",
                e.sandbox
            )));
        }
        let seq: i64 =
            sqlx::query("SELECT COALESCE(MAX(seq), 0) + 1 AS n FROM execs WHERE sandbox = $1")
                .bind(&e.sandbox)
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
        sqlx::query("INSERT INTO execs (id, sandbox, generation, seq, command, env, env_names, workdir, timeout_seconds, state, timed_out, stdout_len, stderr_len, stored, chunks, truncated, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', 0, 0, 0, 0, 0, 0, $10, $11)")
            .bind(&e.id)
            .bind(&e.sandbox)
            .bind(e.generation)
            .bind(seq)
            .bind(command)
            .bind(env)
            .bind(names)
            .bind(e.workdir.clone())
            .bind(e.timeout_seconds)
            .bind(&e.created_by)
            .bind(e.now)
            .execute(&mut *tx)
            .await
            .map_err(|err| super::conflict(err, &format!("an exec `{}` exists already", e.id)))?;
        append(&mut tx, &audit).await?;
        self.notify(&mut tx, &crate::wake::execs(&e.sandbox))
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn read_exec(
        &self,
        sandbox: String,
        id: String,
    ) -> Result<Option<ExecRow>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM execs WHERE id = $1 AND sandbox = $2"
        ))
        .bind(id)
        .bind(sandbox)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(exec_row).transpose()
    }

    pub(super) async fn read_execs(
        &self,
        sandbox: String,
        limit: i64,
    ) -> Result<Vec<ExecRow>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM execs WHERE sandbox = $1 ORDER BY seq DESC, id DESC LIMIT $2"
        ))
        .bind(sandbox)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(exec_row).collect()
    }

    pub(super) async fn claim(
        &self,
        sandbox: String,
        now: i64,
    ) -> Result<Option<ClaimedExec>, StoreError> {
        // A claim lost to another supervisor takes the next command; the
        // bound only keeps a pathological race from spinning.
        for _ in 0..16 {
            let (_guard, mut tx) = self.begin().await?;
            let found = sqlx::query("SELECT e.id, e.command, e.env, e.workdir, e.timeout_seconds FROM execs e JOIN sandboxes s ON s.id = e.sandbox AND s.generation = e.generation AND s.phase = 'ready' WHERE e.sandbox = $1 AND e.state = 'queued' ORDER BY e.seq, e.id LIMIT 1")
                .bind(&sandbox)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = found else {
                return Ok(None);
            };
            let id: String = row.try_get("id")?;
            let claimed = sqlx::query("UPDATE execs SET state = 'running', started_at = $1, env = NULL WHERE id = $2 AND state = 'queued'")
                .bind(now)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
            if claimed.rows_affected() != 1 {
                continue;
            }
            let command: String = row.try_get("command")?;
            let env: Option<String> = row.try_get("env")?;
            let env: BTreeMap<String, String> = match env {
                Some(text) => serde_json::from_str(&text).map_err(|e| io("env", e))?,
                None => BTreeMap::new(),
            };
            let out = ClaimedExec {
                id: id.clone(),
                command: serde_json::from_str(&command).map_err(|e| io("command", e))?,
                env,
                workdir: row.try_get("workdir")?,
                timeout_seconds: row.try_get("timeout_seconds")?,
            };
            self.notify(&mut tx, &crate::wake::exec(&id)).await?;
            tx.commit().await?;
            return Ok(Some(out));
        }
        Ok(None)
    }

    pub(super) async fn write_output(
        &self,
        sandbox: String,
        id: String,
        piece: OutputPiece,
        limit: i64,
    ) -> Result<(), StoreError> {
        let column = match piece.stream {
            Stream::Stdout => "stdout_len",
            Stream::Stderr => "stderr_len",
        };
        let (_guard, mut tx) = self.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT state, {column} AS len, stored, chunks FROM execs WHERE id = $1 AND sandbox = $2{}",
            self.for_update()
        ))
        .bind(&id)
        .bind(&sandbox)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("no exec `{id}` of sandbox `{sandbox}`")))?;
        let state: String = row.try_get("state")?;
        if state != ExecState::Running.word() {
            return Err(StoreError::Conflict(format!(
                "exec `{id}` is {state}: output is taken only while it runs"
            )));
        }
        let len: i64 = row.try_get("len")?;
        let stored: i64 = row.try_get("stored")?;
        let chunks: i64 = row.try_get("chunks")?;
        if piece.offset > len {
            return Err(StoreError::Conflict(format!(
                "the {} of exec `{id}` has {len} bytes stored; a chunk at offset {} would leave a gap: send from offset {len}",
                piece.stream.word(),
                piece.offset
            )));
        }
        // What the stored length already covers is a retry: acknowledged.
        let skip = usize::try_from(len - piece.offset).unwrap_or(usize::MAX);
        let Some(tail) = piece.data.get(skip..).filter(|t| !t.is_empty()) else {
            return Ok(());
        };
        let room = usize::try_from(limit.saturating_sub(stored)).unwrap_or(0);
        let kept = tail.get(..room.min(tail.len())).unwrap_or_default();
        let grown = i64::try_from(tail.len()).unwrap_or(i64::MAX);
        let kept_len = i64::try_from(kept.len()).unwrap_or(i64::MAX);
        let mut seq = chunks;
        if !kept.is_empty() {
            seq += 1;
            sqlx::query("INSERT INTO exec_output (exec, stream, \"offset\", data, seq) VALUES ($1, $2, $3, $4, $5)")
                .bind(&id)
                .bind(piece.stream.word())
                .bind(len)
                .bind(kept.to_vec())
                .bind(seq)
                .execute(&mut *tx)
                .await?;
        }
        let truncated = i64::from(kept.len() < tail.len());
        sqlx::query(&format!("UPDATE execs SET {column} = {column} + $1, stored = stored + $2, chunks = $3, truncated = CASE WHEN $4 = 1 THEN 1 ELSE truncated END WHERE id = $5"))
            .bind(grown)
            .bind(kept_len)
            .bind(seq)
            .bind(truncated)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        self.notify(&mut tx, &crate::wake::exec(&id)).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn finish_exec(
        &self,
        sandbox: String,
        id: String,
        end: ExecEnd,
        now: i64,
        audit: AuditEntry,
    ) -> Result<bool, StoreError> {
        let (_guard, mut tx) = self.begin().await?;
        let row = sqlx::query(&format!(
            "SELECT state, exit_status, timed_out, error FROM execs WHERE id = $1 AND sandbox = $2{}",
            self.for_update()
        ))
        .bind(&id)
        .bind(&sandbox)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("no exec `{id}` of sandbox `{sandbox}`")))?;
        let state: String = row.try_get("state")?;
        if state == ExecState::Queued.word() {
            return Err(StoreError::Conflict(format!(
                "exec `{id}` is queued: only the supervisor that claimed it ends it"
            )));
        }
        if state != ExecState::Running.word() {
            let had = end_of(&row)?;
            if had.as_ref() == Some(&end) {
                return Ok(false);
            }
            let how = match had {
                Some(ExecEnd::Exited { status, timed_out }) => {
                    format!("exited with status {status} (timed out: {timed_out})")
                }
                Some(ExecEnd::Failed(why)) => format!("failed: {why}"),
                None => state,
            };
            return Err(StoreError::Conflict(format!(
                "exec `{id}` ended already, otherwise: it {how}"
            )));
        }
        let (state, status, timed_out, error) = match &end {
            ExecEnd::Exited { status, timed_out } => {
                (ExecState::Exited, Some(*status), *timed_out, None)
            }
            ExecEnd::Failed(why) => (ExecState::Failed, None, false, Some(why.clone())),
        };
        sqlx::query("UPDATE execs SET state = $1, exit_status = $2, timed_out = $3, error = $4, ended_at = $5, env = NULL WHERE id = $6 AND state = 'running'")
            .bind(state.word())
            .bind(status)
            .bind(i64::from(timed_out))
            .bind(error)
            .bind(now)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        append(&mut tx, &audit).await?;
        self.notify(&mut tx, &crate::wake::exec(&id)).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn read_output(
        &self,
        id: String,
        stdout: i64,
        stderr: i64,
        max: usize,
    ) -> Result<Vec<OutputPiece>, StoreError> {
        // The pieces' places first, without their bytes: only those that
        // fit in the answer are read.
        let places = sqlx::query(&format!("SELECT stream, \"offset\", CAST(LENGTH(data) AS BIGINT) AS len, seq FROM exec_output WHERE {AFTER} ORDER BY seq LIMIT $4"))
            .bind(&id)
            .bind(stdout)
            .bind(stderr)
            .bind(PIECES_PER_ANSWER)
            .fetch_all(&self.pool)
            .await?;
        // (seq, stream, offset, first byte kept, bytes kept)
        let mut wanted: Vec<(i64, Stream, i64, usize, usize)> = Vec::new();
        let mut room = max;
        for p in &places {
            if room == 0 {
                break;
            }
            let word: String = p.try_get("stream")?;
            let stream = Stream::parse(&word).ok_or_else(|| io("stream", &word))?;
            let offset: i64 = p.try_get("offset")?;
            let len = usize::try_from(p.try_get::<i64, _>("len")?).unwrap_or(0);
            let from = match stream {
                Stream::Stdout => stdout,
                Stream::Stderr => stderr,
            };
            let skip = usize::try_from(from.saturating_sub(offset)).unwrap_or(0);
            let take = len.saturating_sub(skip).min(room);
            room -= take;
            wanted.push((p.try_get("seq")?, stream, offset, skip, take));
        }
        let (Some(first), Some(last)) = (wanted.first(), wanted.last()) else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(&format!(
            "SELECT seq, data FROM exec_output WHERE {AFTER} AND seq >= $4 AND seq <= $5 ORDER BY seq"
        ))
        .bind(&id)
        .bind(stdout)
        .bind(stderr)
        .bind(first.0)
        .bind(last.0)
        .fetch_all(&self.pool)
        .await?;
        let mut data: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
        for r in &rows {
            data.insert(r.try_get("seq")?, r.try_get("data")?);
        }
        let mut out = Vec::with_capacity(wanted.len());
        for (seq, stream, offset, skip, take) in wanted {
            let bytes = data
                .get(&seq)
                .and_then(|d| d.get(skip..skip.saturating_add(take)))
                .ok_or_else(|| io("data", format!("piece {seq} is shorter than its length")))?;
            out.push(OutputPiece {
                stream,
                offset: offset.saturating_add(i64::try_from(skip).unwrap_or(i64::MAX)),
                data: bytes.to_vec(),
            });
        }
        Ok(out)
    }
}
