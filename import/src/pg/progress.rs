//! Where an import stands, kept in a table beside the target and updated in
//! each batch's transaction: a batch's rows and its marker commit together or
//! not at all, so `--resume` skips exactly the source records already in.

use super::libpq::{Connection, PgError};
use crate::mapping::ddl::ident;

pub const TABLE: &str = "tsbucket_import";

#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub source: String,
    pub mapping: String,
    pub units: u64,
    pub rows: u64,
    pub skipped: u64,
    pub finished: bool,
}

/// The marker table of a schema (`None`: the first schema of the search path).
pub fn table(schema: Option<&str>) -> String {
    match schema {
        Some(s) => format!("{}.{}", ident(s), TABLE),
        None => TABLE.to_string(),
    }
}

pub fn create_table_sql(schema: Option<&str>) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n\
         \x20   target text PRIMARY KEY,\n\
         \x20   source text NOT NULL,\n\
         \x20   mapping jsonb NOT NULL,\n\
         \x20   units bigint NOT NULL,\n\
         \x20   rows bigint NOT NULL,\n\
         \x20   skipped bigint NOT NULL,\n\
         \x20   finished boolean NOT NULL,\n\
         \x20   updated_at timestamptz NOT NULL DEFAULT now()\n)",
        table(schema)
    )
}

/// The marker of `target`, if an import into it was ever started.
pub fn read(c: &Connection, schema: Option<&str>, target: &str) -> Result<Option<Progress>, PgError> {
    let exists = c.query_params("SELECT to_regclass($1) IS NOT NULL", &[Some(&table(schema))])?;
    if exists.first().and_then(|r| r[0].as_deref()) != Some("t") {
        return Ok(None);
    }
    let rows = c.query_params(
        &format!("SELECT source, mapping::text, units, rows, skipped, finished FROM {} WHERE target = $1", table(schema)),
        &[Some(target)],
    )?;
    Ok(rows.first().map(|r| {
        let num = |i: usize| r[i].as_deref().and_then(|s| s.parse().ok()).unwrap_or(0);
        Progress {
            source: r[0].clone().unwrap_or_default(),
            mapping: r[1].clone().unwrap_or_default(),
            units: num(2),
            rows: num(3),
            skipped: num(4),
            finished: r[5].as_deref() == Some("t"),
        }
    }))
}

pub fn insert(c: &Connection, schema: Option<&str>, target: &str, p: &Progress) -> Result<(), PgError> {
    c.query_params(
        &format!(
            "INSERT INTO {} (target, source, mapping, units, rows, skipped, finished) VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)",
            table(schema)
        ),
        &[
            Some(target),
            Some(&p.source),
            Some(&p.mapping),
            Some(&p.units.to_string()),
            Some(&p.rows.to_string()),
            Some(&p.skipped.to_string()),
            Some(if p.finished { "true" } else { "false" }),
        ],
    )
    .map(|_| ())
}

/// Moves the marker from `from` records to `p`'s; refuses when it no longer
/// stands at `from` (another import into the same table moved it), so that
/// two resumed runs cannot both add the same rows.
pub fn update(c: &Connection, schema: Option<&str>, target: &str, from: u64, p: &Progress) -> Result<bool, PgError> {
    let rows = c.query_params(
        &format!(
            "UPDATE {} SET units = $2, rows = $3, skipped = $4, finished = $5, updated_at = now() WHERE target = $1 AND units = $6 RETURNING 1",
            table(schema)
        ),
        &[
            Some(target),
            Some(&p.units.to_string()),
            Some(&p.rows.to_string()),
            Some(&p.skipped.to_string()),
            Some(if p.finished { "true" } else { "false" }),
            Some(&from.to_string()),
        ],
    )?;
    Ok(rows.len() == 1)
}
