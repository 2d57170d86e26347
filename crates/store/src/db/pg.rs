//! [`Db`] on PostgreSQL (the `postgres` client): one connection per store, statements prepared once each.
//!
//! The client is synchronous and drives its own small runtime, which cannot run where a tokio runtime is
//! already driving the thread, so inside one every use goes through `block_in_place` (or, on a single-threaded
//! runtime, a scoped thread of its own); callers wait, exactly as they wait for SQLite's lock.

use std::collections::HashMap;
use std::error::Error;
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use bytes::BytesMut;
use postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use postgres::{Client, Config, GenericClient, NoTls, Statement};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Db, DbResult, Row, Value};

type BoxError = Box<dyn Error + Sync + Send>;

/// The open connection and what was prepared on it.
pub(crate) struct PgConn {
    client: Client,
    statements: HashMap<String, Statement>,
}

/// Connections one store opens at most. Each call is a network round trip, so one connection serialises a
/// process's many requests; a few let them overlap. Opened only when calls overlap; a fleet needs the
/// server's `max_connections` at least this times the number of processes.
pub(crate) const CONNECTIONS: usize = 4;

/// A PostgreSQL store's connections, each behind a lock like SQLite's one.
pub(crate) struct PgStore {
    config: Config,
    tls: Option<MakeRustlsConnect>,
    conns: Vec<Mutex<Option<PgConn>>>,
    /// Where the next call starts looking for an idle connection.
    next: AtomicUsize,
}

impl PgStore {
    /// Parses `url` (`postgres://user:password@host:port/db?sslmode=…`) and connects. A URL without a
    /// password takes `PGPASSWORD` from the environment, as libpq does.
    pub(crate) fn connect(url: &str) -> Result<PgStore, String> {
        let (url, root_cert) = super::tls::split_root_cert(url);
        let mut config = Config::from_str(&url).map_err(|e| e.to_string())?;
        let tls = super::tls::connector(config.get_ssl_mode(), root_cert.as_deref())?;
        if config.get_password().is_none() {
            if let Ok(password) = std::env::var("PGPASSWORD") {
                config.password(password);
            }
        }
        let store = PgStore {
            config,
            tls,
            conns: (0..CONNECTIONS).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        };
        store
            .run(|_| Ok::<_, postgres::Error>(()))
            .map_err(|e| with_causes(&e))?;
        Ok(store)
    }

    /// Runs `f` on the connection (reconnecting first if the server closed it), where the client may block:
    /// in place outside any async runtime, through `block_in_place` on a worker of a multi-threaded one, and on
    /// a thread of its own from a single-threaded one.
    pub(crate) fn run<T: Send, E: From<postgres::Error> + Send>(
        &self,
        f: impl FnOnce(&mut PgConn) -> Result<T, E> + Send,
    ) -> Result<T, E> {
        let mut guard = self.lock();
        let slot = &mut *guard;
        let call = move || {
            if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
                *slot = Some(PgConn {
                    client: self.open()?,
                    statements: HashMap::new(),
                });
            }
            let conn = slot.as_mut().expect("connected just above");
            f(conn)
        };
        match Handle::try_current().map(|h| h.runtime_flavor()) {
            Err(_) => call(),
            Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(call),
            Ok(_) => std::thread::scope(|s| {
                s.spawn(call)
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
        }
    }

    fn open(&self) -> Result<Client, postgres::Error> {
        match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        }
    }

    /// An idle connection if there is one (the first slot first, so a quiet process keeps one open), else
    /// the next in turn, waited for.
    fn lock(&self) -> MutexGuard<'_, Option<PgConn>> {
        for slot in &self.conns {
            match slot.try_lock() {
                Ok(guard) => return guard,
                Err(TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(TryLockError::WouldBlock) => {}
            }
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        self.conns[turn]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for PgStore {
    /// Closing the client blocks on its runtime too, so it closes on a thread of its own.
    fn drop(&mut self) {
        let open: Vec<PgConn> = self
            .conns
            .iter_mut()
            .filter_map(|slot| slot.get_mut().unwrap_or_else(|p| p.into_inner()).take())
            .collect();
        if !open.is_empty() {
            let closing = std::thread::spawn(move || drop(open));
            let _ = closing.join();
        }
    }
}

impl PgConn {
    /// Outside a transaction.
    pub(crate) fn db(&mut self) -> PgDb<'_, Client> {
        PgDb {
            client: &mut self.client,
            statements: &mut self.statements,
        }
    }

    /// Runs `f` in a transaction, committed when it returns `Ok`.
    pub(crate) fn transaction<T, E: From<postgres::Error>>(
        &mut self,
        f: impl FnOnce(&mut PgDb<'_, postgres::Transaction<'_>>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut tx = self.client.transaction()?;
        let value = f(&mut PgDb {
            client: &mut tx,
            statements: &mut self.statements,
        })?;
        tx.commit()?;
        Ok(value)
    }
}

/// [`Db`] over the client or one of its transactions.
pub(crate) struct PgDb<'a, C> {
    client: &'a mut C,
    statements: &'a mut HashMap<String, Statement>,
}

impl<C: GenericClient> PgDb<'_, C> {
    fn statement(&mut self, sql: &str) -> DbResult<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let prepared = self.client.prepare(&placeholders(sql))?;
        self.statements.insert(sql.to_string(), prepared.clone());
        Ok(prepared)
    }

    /// Runs DDL inside the transaction.
    pub(crate) fn batch(&mut self, sql: &str) -> DbResult<()> {
        Ok(self.client.batch_execute(sql)?)
    }
}

impl<C: GenericClient> Db for PgDb<'_, C> {
    fn exec(&mut self, sql: &str, args: &[Value]) -> DbResult<u64> {
        let stmt = self.statement(sql)?;
        Ok(self.client.execute(&stmt, &refs(args))?)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> DbResult<Vec<Row>> {
        let stmt = self.statement(sql)?;
        let rows = self.client.query(&stmt, &refs(args))?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<_, Value>(i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Row)
                    .map_err(Into::into)
            })
            .collect()
    }
}

/// The error and what caused it, as one line (the handshake's own reason is a cause, not the message).
fn with_causes(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

fn refs(args: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

/// SQLite's `?N` placeholders as PostgreSQL's `$N` (outside quoted strings).
pub(crate) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        let numbered = chars.peek().is_some_and(char::is_ascii_digit);
        out.push(if c == '?' && !quoted && numbered {
            '$'
        } else {
            c
        });
    }
    out
}

/// The URL with its password (in the user part or as `password=`) replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@') {
            let user_info = &out[rest..rest + at];
            if let Some(colon) = user_info.find(':') {
                out.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].find("password=") {
        let start = from + i + "password=".len();
        let end = out[start..]
            .find(['&', ' '])
            .map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
        from = start + 3;
    }
    out
}

impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => int_to_sql(*i, ty, out),
            Value::Real(x) => match *ty {
                Type::FLOAT4 => (*x as f32).to_sql(ty, out),
                _ => x.to_sql(ty, out),
            },
            Value::Text(s) => match *ty {
                Type::BYTEA => s.as_bytes().to_sql(ty, out),
                _ => s.as_str().to_sql(ty, out),
            },
            Value::Blob(b) => b.as_slice().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn int_to_sql(i: i64, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
    match *ty {
        Type::INT2 => i16::try_from(i)?.to_sql(ty, out),
        Type::INT4 => i32::try_from(i)?.to_sql(ty, out),
        Type::BOOL => (i != 0).to_sql(ty, out),
        Type::FLOAT8 => (i as f64).to_sql(ty, out),
        Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
        _ => i.to_sql(ty, out),
    }
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(match *ty {
            Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, raw)?)),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::BYTEA => Value::Blob(Vec::<u8>::from_sql(ty, raw)?),
            _ => Value::Text(String::from_sql(ty, raw)?),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_outside_strings() {
        assert_eq!(
            placeholders("SELECT ?1, '?2', ?10 WHERE a = ?"),
            "SELECT $1, '?2', $10 WHERE a = ?"
        );
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://nmb:s3cret@db.example:5432/runs?sslmode=require"),
            "postgres://nmb:***@db.example:5432/runs?sslmode=require"
        );
        assert_eq!(
            redact("postgresql://h/db?user=a&password=s3cret&x=1"),
            "postgresql://h/db?user=a&password=***&x=1"
        );
        assert_eq!(
            redact("host=h user=a password=s3cret dbname=d"),
            "host=h user=a password=*** dbname=d"
        );
        assert_eq!(redact("postgres://nmb@h/db"), "postgres://nmb@h/db");
    }
}
