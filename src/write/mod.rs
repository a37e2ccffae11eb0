//! The write path: a per-backend catalog of open buckets (one per table x
//! series x window x subtransaction) that rows are appended to, and the rules
//! that close a bucket and write it to the store.
//!
//! Buckets are written at the end of each statement, so a later statement (or
//! another session after commit) finds every row in the store, and a scan
//! never has to look at memory. A bucket only ever holds rows of one
//! subtransaction, so ROLLBACK TO SAVEPOINT discards exactly its own rows.
//!
//! Calls into Postgres that can run statements (SPI, nextval, writes, whose
//! ExecutorFinish flushes buffers) are made only while BUFFER is not borrowed.
//!
//! `buffer` holds the open buckets, `append` adds rows to them, `flush`
//! writes them to the store.

pub mod append;
pub mod buffer;
pub mod flush;
