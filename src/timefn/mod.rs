//! SQL functions of time: MongoDB's date operators (`dates`), the window
//! aggregates of `$setWindowFields` (`aggregates`), and first / last by time
//! (`first_last`). The SQL signatures (defaults, volatility, aggregates) are
//! in sql/time_functions.sql.

pub mod aggregates;
pub mod dates;
pub mod first_last;
