//! The statements that create the target: the table `USING tsbucket` and the
//! `tsbucket.create_timeseries` call carrying the collection's options.

use super::schema::{From, Schema};
use crate::source::options::{TimeseriesOptions, Window};

/// Quotes an identifier (always: names keep their case and characters).
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Quotes a string literal (standard_conforming_strings, on since 9.1).
pub fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// `schema.table` or `table`, each part quoted.
pub fn qualified(schema: Option<&str>, table: &str) -> String {
    match schema {
        Some(s) => format!("{}.{}", ident(s), ident(table)),
        None => ident(table),
    }
}

pub fn create_table(target: &str, s: &Schema) -> String {
    let cols: Vec<String> = s
        .columns
        .iter()
        .map(|c| {
            let not_null = if c.from == From::Time { " NOT NULL" } else { "" };
            format!("    {} {}{not_null}", ident(&c.name), c.ty.sql())
        })
        .collect();
    format!("CREATE TABLE {target} (\n{}\n) USING tsbucket", cols.join(",\n"))
}

pub fn create_timeseries(target: &str, s: &Schema, o: &TimeseriesOptions) -> String {
    let time = s.columns.iter().find(|c| c.from == From::Time).map(|c| c.name.as_str()).unwrap_or(&s.time_field);
    let mut args = vec![literal(target), format!("time_column => {}", literal(time))];
    let metas = s.meta_columns();
    match metas.as_slice() {
        [] => {}
        [one] => args.push(format!("meta_column => {}", literal(one))),
        many => args.push(format!(
            "meta_columns => ARRAY[{}]::name[]",
            many.iter().map(|m| literal(m)).collect::<Vec<_>>().join(", ")
        )),
    }
    match o.window() {
        Window::Granularity(g) => args.push(format!("granularity => {}", literal(&g))),
        Window::Span(secs) => {
            args.push(format!("bucket_max_span => '{secs} seconds'"));
            args.push(format!("bucket_rounding => '{secs} seconds'"));
        }
    }
    if let Some(e) = o.expire_after_seconds {
        args.push(format!("expire_after => '{e} seconds'"));
    }
    format!("SELECT tsbucket.create_timeseries({})", args.join(", "))
}

/// The COPY statement feeding the table, columns named in schema order.
pub fn copy(target: &str, s: &Schema) -> String {
    let cols: Vec<String> = s.columns.iter().map(|c| ident(&c.name)).collect();
    format!("COPY {target} ({}) FROM STDIN", cols.join(", "))
}
