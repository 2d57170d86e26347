//! The one seam between the store's queries and the engine that runs them.
//!
//! Every query in this crate is written once, in the SQL that SQLite and PostgreSQL share (`?N` placeholders,
//! `ON CONFLICT`, `RETURNING`, `CAST`), against [`Db`]. The engines ([`sqlite`], [`pg`]) bind [`Value`]s and
//! hand rows back as [`Row`]s; nothing outside this module knows which one runs a query. DDL is the exception:
//! each engine has its own migrations, versioned alike.

pub(crate) mod pg;
pub(crate) mod sqlite;
pub(crate) mod tls;

/// A bound parameter or a column value, in the types both engines store.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a real",
            Value::Text(_) => "text",
            Value::Blob(_) => "a blob",
        }
    }

    /// The text behind a column written by `packed::pack` (or plain text from older stores): TEXT as is, BLOB
    /// inflated. `None` for NULL.
    pub(crate) fn unpacked(&self) -> Result<Option<String>, String> {
        match self {
            Value::Null => Ok(None),
            Value::Text(t) => Ok(Some(t.clone())),
            Value::Blob(b) => crate::packed::inflate(b).map(Some),
            other => Err(format!(
                "expected text or a compressed blob, found {other:?}"
            )),
        }
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// `args![a, b, c]`: a parameter list for [`Db`].
macro_rules! args {
    ($($v:expr),* $(,)?) => { &[$($crate::db::Value::from($v)),*][..] };
}
pub(crate) use args;

/// Why a query failed: the engine's own error, or a value that is not what the store reads it as.
#[derive(Debug)]
pub(crate) enum DbError {
    Sqlite(rusqlite::Error),
    Postgres(postgres::Error),
    Decode {
        column: usize,
        expected: &'static str,
        found: &'static str,
    },
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> Self {
        DbError::Sqlite(e)
    }
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> Self {
        DbError::Postgres(e)
    }
}

pub(crate) type DbResult<T> = Result<T, DbError>;

/// One result row.
#[derive(Debug, Clone)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    pub(crate) fn get<T: FromValue>(&self, column: usize) -> DbResult<T> {
        let value = self.0.get(column).unwrap_or(&Value::Null);
        T::from_value(value).ok_or(DbError::Decode {
            column,
            expected: T::EXPECTED,
            found: value.kind(),
        })
    }

    /// A column written by `packed::pack` (or plain text from older stores), as text.
    pub(crate) fn unpacked(&self, column: usize) -> DbResult<Option<String>> {
        let value = self.0.get(column).unwrap_or(&Value::Null);
        value.unpacked().map_err(|_| DbError::Decode {
            column,
            expected: "text or zlib-compressed text",
            found: value.kind(),
        })
    }
}

/// A Rust type a column can be read as.
pub(crate) trait FromValue: Sized {
    const EXPECTED: &'static str;
    fn from_value(v: &Value) -> Option<Self>;
}

impl FromValue for i64 {
    const EXPECTED: &'static str = "an integer";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
}
impl FromValue for u32 {
    const EXPECTED: &'static str = "an integer from 0 to 2^32-1";
    fn from_value(v: &Value) -> Option<Self> {
        i64::from_value(v).and_then(|i| u32::try_from(i).ok())
    }
}
impl FromValue for bool {
    const EXPECTED: &'static str = "0 or 1";
    fn from_value(v: &Value) -> Option<Self> {
        i64::from_value(v).map(|i| i != 0)
    }
}
impl FromValue for f64 {
    const EXPECTED: &'static str = "a number";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Real(x) => Some(*x),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
}
impl FromValue for String {
    const EXPECTED: &'static str = "text";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Text(s) => Some(s.clone()),
            _ => None,
        }
    }
}
impl FromValue for Vec<u8> {
    const EXPECTED: &'static str = "a blob";
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Blob(b) => Some(b.clone()),
            _ => None,
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    const EXPECTED: &'static str = T::EXPECTED;
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Null => Some(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// A connection or an open transaction of either engine. Queries use `?1`, `?2`, … placeholders.
pub(crate) trait Db {
    /// Runs a statement; returns the number of rows it changed.
    fn exec(&mut self, sql: &str, args: &[Value]) -> DbResult<u64>;
    /// Runs a query and returns all its rows.
    fn query(&mut self, sql: &str, args: &[Value]) -> DbResult<Vec<Row>>;

    /// The first row, if any.
    fn query_opt(&mut self, sql: &str, args: &[Value]) -> DbResult<Option<Row>> {
        Ok(self.query(sql, args)?.into_iter().next())
    }
}

/// The first column of the first row; `T` may be an `Option` for queries that can return no row.
pub(crate) fn scalar<T: FromValue>(db: &mut dyn Db, sql: &str, args: &[Value]) -> DbResult<T> {
    match db.query_opt(sql, args)? {
        Some(row) => row.get(0),
        None => T::from_value(&Value::Null).ok_or(DbError::Decode {
            column: 0,
            expected: T::EXPECTED,
            found: "no row",
        }),
    }
}
