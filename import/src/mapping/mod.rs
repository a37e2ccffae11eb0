//! Documents to a table: the schema (inferred or fixed), the DDL that creates
//! it, and the rows as COPY text. Pure Rust: no connection, no files.

pub mod ddl;
pub mod encode;
pub mod schema;
