//! Which column of a row-per-item file holds which field: the field's own name, a dataset's known column name,
//! or what `--map FIELD=COLUMN` says.

use std::collections::BTreeMap;

use crate::SuiteError;

/// Field → column.
pub struct Columns(BTreeMap<&'static str, String>);

impl Columns {
    /// `fields` read from columns of their own names, except where `defaults` (a dataset's names) or then `map`
    /// (`--map`) say otherwise. A mapped field that is not one of `fields` is an error that lists them.
    pub fn new(
        fields: &[&'static str],
        defaults: &[(&'static str, &'static str)],
        map: &[(String, String)],
    ) -> Result<Columns, SuiteError> {
        let mut columns: BTreeMap<&'static str, String> =
            fields.iter().map(|f| (*f, f.to_string())).collect();
        for (field, column) in defaults {
            columns.insert(field, column.to_string());
        }
        for (field, column) in map {
            let Some(slot) = columns.get_mut(field.as_str()) else {
                return Err(SuiteError::Spec(format!(
                    "--map {field}={column}: unknown field {field:?}; expected one of {}",
                    fields.join(", ")
                )));
            };
            *slot = column.clone();
        }
        Ok(Columns(columns))
    }

    /// The column of `field`.
    pub fn of<'a>(&'a self, field: &'a str) -> &'a str {
        self.0.get(field).map_or(field, String::as_str)
    }
}
