//! [`Db`] on SQLite (rusqlite): statements are cached per connection, values map one to one.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use super::{Db, DbResult, Row, Value};

/// A connection, or a transaction through its `Deref` to the connection.
pub(crate) struct SqliteDb<'c>(pub(crate) &'c Connection);

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(x) => ValueRef::Real(*x),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// A stored value as the store's [`Value`]; text that is not UTF-8 is kept as a blob.
pub(crate) fn value_of(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(x) => Value::Real(x),
        ValueRef::Text(t) => match std::str::from_utf8(t) {
            Ok(s) => Value::Text(s.to_string()),
            Err(_) => Value::Blob(t.to_vec()),
        },
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

impl Db for SqliteDb<'_> {
    fn exec(&mut self, sql: &str, args: &[Value]) -> DbResult<u64> {
        let changed = self
            .0
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(args))?;
        Ok(changed as u64)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> DbResult<Vec<Row>> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let values = (0..width)
                .map(|i| row.get_ref(i).map(value_of))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            out.push(Row(values));
        }
        Ok(out)
    }
}
