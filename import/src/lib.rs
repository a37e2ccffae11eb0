//! tsbucket-import: MongoDB time-series collections into tsbucket tables.
//!
//! Layers, each a folder, each using only those below it:
//! - `run` (the import loop: batches, progress, resume) and `main` (the command line);
//! - `pg` (libpq and the progress marker) and `mapping` (schema, DDL, COPY rows);
//! - `source` (mongoexport and mongodump inputs, bucket unpacking);
//! - `bsoncolumn` (MongoDB's compressed column format).

pub mod bsoncolumn;
pub mod mapping;
pub mod pg;
pub mod run;
pub mod source;
