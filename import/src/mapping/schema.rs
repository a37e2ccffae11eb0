//! The table a collection becomes: which document field fills which column,
//! with which type. Inferred from the first documents, fixed by `--schema`,
//! and stored with the import's progress so that a resumed import maps
//! exactly as the first run did.

use std::collections::BTreeMap;

use bson::Bson;

use crate::source::measurement::Measurement;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColType {
    Float8,
    Int4,
    Int8,
    Numeric,
    Text,
    Bool,
    Timestamptz,
    Jsonb,
}

impl ColType {
    pub fn sql(self) -> &'static str {
        match self {
            ColType::Float8 => "float8",
            ColType::Int4 => "int4",
            ColType::Int8 => "int8",
            ColType::Numeric => "numeric",
            ColType::Text => "text",
            ColType::Bool => "boolean",
            ColType::Timestamptz => "timestamptz",
            ColType::Jsonb => "jsonb",
        }
    }

    pub fn parse(s: &str) -> Option<ColType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "float8" | "double" | "double precision" => ColType::Float8,
            "int4" | "int" | "integer" | "int32" => ColType::Int4,
            "int8" | "bigint" | "int64" | "long" => ColType::Int8,
            "numeric" | "decimal" | "decimal128" => ColType::Numeric,
            "text" | "string" => ColType::Text,
            "bool" | "boolean" => ColType::Bool,
            "timestamptz" | "date" => ColType::Timestamptz,
            "jsonb" => ColType::Jsonb,
            _ => return None,
        })
    }
}

/// Where a column's values come from in a measurement document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum From {
    /// The time field.
    Time,
    /// The meta field as a whole.
    Meta,
    /// A subfield of the meta field (an object).
    MetaSub(String),
    /// A top-level measurement field.
    Field(String),
    /// Every field no other column takes, as one jsonb object.
    Rest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub ty: ColType,
    pub from: From,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    pub time_field: String,
    pub meta_field: Option<String>,
    pub keep_id: bool,
    pub columns: Vec<Column>,
}

/// How the meta field becomes columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaAs {
    /// An object's subfields each a column (a scalar meta: one column).
    Columns,
    /// One jsonb column.
    Jsonb,
}

pub struct InferOptions<'a> {
    pub time_field: &'a str,
    pub meta_field: Option<&'a str>,
    pub meta_as: MetaAs,
    pub keep_id: bool,
    pub rest_column: Option<&'a str>,
    /// `--schema`: field (or `meta.sub`) -> type, taking precedence over the data.
    pub fixed: &'a BTreeMap<String, ColType>,
}

/// The types a field showed in the sample, joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Nothing,
    Only(ColType),
    /// Irreconcilable (a string and a number), or nested: into jsonb.
    Mixed,
}

fn scalar_type(v: &Bson) -> Option<Option<ColType>> {
    Some(match v {
        Bson::Null | Bson::Undefined => None,
        Bson::Double(_) => Some(ColType::Float8),
        Bson::Int32(_) => Some(ColType::Int4),
        Bson::Int64(_) => Some(ColType::Int8),
        Bson::Decimal128(_) => Some(ColType::Numeric),
        Bson::String(_) | Bson::ObjectId(_) | Bson::Symbol(_) => Some(ColType::Text),
        Bson::Boolean(_) => Some(ColType::Bool),
        Bson::DateTime(_) => Some(ColType::Timestamptz),
        _ => return None,
    })
}

fn join(seen: Seen, v: &Bson) -> Seen {
    let t = match scalar_type(v) {
        None => return Seen::Mixed,
        Some(None) => return seen,
        Some(Some(t)) => t,
    };
    use ColType::*;
    match seen {
        Seen::Nothing => Seen::Only(t),
        Seen::Mixed => Seen::Mixed,
        Seen::Only(s) if s == t => Seen::Only(s),
        Seen::Only(s) => match (s, t) {
            (Int4, Int8) | (Int8, Int4) => Seen::Only(Int8),
            (Int4 | Int8 | Float8, Int4 | Int8 | Float8) => Seen::Only(Float8),
            (Numeric, Int4 | Int8 | Float8) | (Int4 | Int8 | Float8, Numeric) => Seen::Only(Numeric),
            _ => Seen::Mixed,
        },
    }
}

fn unique_name(want: &str, taken: &mut Vec<String>) -> String {
    let mut name = want.to_string();
    let mut n = 1;
    while taken.iter().any(|t| t == &name) {
        n += 1;
        name = format!("{want}_{n}");
    }
    taken.push(name.clone());
    name
}

/// Infers the table from a sample of measurements.
pub fn infer(sample: &[Measurement], o: &InferOptions) -> Schema {
    let mut fields: Vec<(String, Seen)> = Vec::new();
    let mut meta_subs: Vec<(String, Seen)> = Vec::new();
    let mut meta_seen = Seen::Nothing;
    let mut meta_objects = false;
    let note = |list: &mut Vec<(String, Seen)>, k: &str, v: &Bson| match list.iter_mut().find(|(n, _)| n == k) {
        Some((_, s)) => *s = join(*s, v),
        None => list.push((k.to_string(), join(Seen::Nothing, v))),
    };
    for d in sample {
        for (k, v) in d.iter() {
            if k == o.time_field || (k == "_id" && !o.keep_id) {
                continue;
            }
            if Some(k) == o.meta_field {
                if let Bson::Document(m) = v {
                    meta_objects = true;
                    for (sk, sv) in m {
                        note(&mut meta_subs, sk, sv);
                    }
                } else {
                    meta_seen = join(meta_seen, v);
                }
                continue;
            }
            note(&mut fields, k, v);
        }
    }
    let mut taken = Vec::new();
    let mut columns = vec![Column { name: unique_name(o.time_field, &mut taken), ty: ColType::Timestamptz, from: From::Time }];
    if let Some(m) = o.meta_field {
        let whole = |seen: Seen| match o.fixed.get(m) {
            Some(t) => *t,
            None => match seen {
                Seen::Only(t) => t,
                _ => ColType::Jsonb,
            },
        };
        if meta_objects && o.meta_as == MetaAs::Columns && !o.fixed.contains_key(m) && meta_seen == Seen::Nothing {
            for (sk, seen) in &meta_subs {
                let ty = o.fixed.get(&format!("{m}.{sk}")).copied().unwrap_or(match seen {
                    Seen::Only(t) => *t,
                    _ => ColType::Jsonb,
                });
                columns.push(Column { name: unique_name(sk, &mut taken), ty, from: From::MetaSub(sk.clone()) });
            }
            // Subfields `--schema` names that the sample did not show.
            let prefix = format!("{m}.");
            for (k, t) in o.fixed {
                if let Some(sk) = k.strip_prefix(&prefix)
                    && !meta_subs.iter().any(|(n, _)| n == sk)
                {
                    columns.push(Column { name: unique_name(sk, &mut taken), ty: *t, from: From::MetaSub(sk.to_string()) });
                }
            }
        } else {
            let seen = if meta_objects { Seen::Mixed } else { meta_seen };
            columns.push(Column { name: unique_name(m, &mut taken), ty: whole(seen), from: From::Meta });
        }
    }
    for (k, seen) in &fields {
        let ty = match (o.fixed.get(k), seen) {
            (Some(t), _) => *t,
            (None, Seen::Only(t)) => *t,
            // Nested, mixed or only null: the rest column holds it, as it is.
            (None, _) if o.rest_column.is_some() => continue,
            (None, _) => ColType::Jsonb,
        };
        columns.push(Column { name: unique_name(k, &mut taken), ty, from: From::Field(k.clone()) });
    }
    // Fields fixed by --schema that the sample did not show.
    for (k, t) in o.fixed {
        let known = Some(k.as_str()) == o.meta_field
            || o.meta_field.is_some_and(|m| k.starts_with(&format!("{m}.")))
            || fields.iter().any(|(f, _)| f == k);
        if !known && k != o.time_field {
            columns.push(Column { name: unique_name(k, &mut taken), ty: *t, from: From::Field(k.clone()) });
        }
    }
    if let Some(r) = o.rest_column {
        columns.push(Column { name: unique_name(r, &mut taken), ty: ColType::Jsonb, from: From::Rest });
    }
    Schema { time_field: o.time_field.to_string(), meta_field: o.meta_field.map(str::to_string), keep_id: o.keep_id, columns }
}

impl Schema {
    pub fn meta_columns(&self) -> Vec<&str> {
        self.columns.iter().filter(|c| matches!(c.from, From::Meta | From::MetaSub(_))).map(|c| c.name.as_str()).collect()
    }

    pub fn rest(&self) -> Option<&Column> {
        self.columns.iter().find(|c| c.from == From::Rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn opts<'a>(fixed: &'a BTreeMap<String, ColType>, meta_as: MetaAs) -> InferOptions<'a> {
        InferOptions { time_field: "t", meta_field: Some("m"), meta_as, keep_id: false, rest_column: Some("doc"), fixed }
    }

    #[test]
    fn types_join_and_nested_fields_go_to_the_rest() {
        let t = bson::DateTime::now();
        let sample = vec![
            doc! { "_id": 1, "t": t, "m": { "site": "a", "n": 1 }, "x": 1, "y": 1.5, "s": "a", "o": { "a": 1 } },
            doc! { "t": t, "m": { "site": "b", "n": 2i64 }, "x": 2i64, "y": 2, "s": 3, "b": true },
        ];
        let fixed = BTreeMap::new();
        let s = infer(&sample.iter().cloned().map(Measurement::from).collect::<Vec<_>>(), &opts(&fixed, MetaAs::Columns));
        let cols: Vec<(&str, ColType)> = s.columns.iter().map(|c| (c.name.as_str(), c.ty)).collect();
        assert_eq!(
            cols,
            vec![
                ("t", ColType::Timestamptz),
                ("site", ColType::Text),
                ("n", ColType::Int8),
                ("x", ColType::Int8),
                ("y", ColType::Float8),
                ("b", ColType::Bool),
                ("doc", ColType::Jsonb)
            ]
        );
        assert_eq!(s.meta_columns(), vec!["site", "n"]);
        let s = infer(&sample.iter().cloned().map(Measurement::from).collect::<Vec<_>>(), &opts(&fixed, MetaAs::Jsonb));
        assert_eq!(s.meta_columns(), vec!["m"]);
        assert_eq!(s.columns[1].ty, ColType::Jsonb);
    }

    #[test]
    fn fixed_types_win_and_name_fields_the_sample_lacks() {
        let t = bson::DateTime::now();
        let sample = vec![doc! { "t": t, "m": "dev1", "x": 1 }];
        let mut fixed = BTreeMap::new();
        fixed.insert("x".to_string(), ColType::Float8);
        fixed.insert("later".to_string(), ColType::Text);
        let s = infer(&sample.iter().cloned().map(Measurement::from).collect::<Vec<_>>(), &opts(&fixed, MetaAs::Columns));
        let cols: Vec<(&str, ColType)> = s.columns.iter().map(|c| (c.name.as_str(), c.ty)).collect();
        assert_eq!(cols, vec![("t", ColType::Timestamptz), ("m", ColType::Text), ("x", ColType::Float8), ("later", ColType::Text), ("doc", ColType::Jsonb)]);
    }
}
