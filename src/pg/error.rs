//! Every error tsbucket raises carries a SQLSTATE, a message and a hint.

use pgrx::pg_sys::panic::ErrorReport;
pub use pgrx::PgSqlErrorCode as SqlState;

pub const FEATURE_NOT_SUPPORTED: SqlState = SqlState::ERRCODE_FEATURE_NOT_SUPPORTED;
pub const NOT_IN_PREREQUISITE_STATE: SqlState = SqlState::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
pub const SERIALIZATION_FAILURE: SqlState = SqlState::ERRCODE_T_R_SERIALIZATION_FAILURE;
pub const DATA_CORRUPTED: SqlState = SqlState::ERRCODE_DATA_CORRUPTED;
pub const TRIGGERED_DATA_CHANGE_VIOLATION: SqlState = SqlState::ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION;
pub const NOT_NULL_VIOLATION: SqlState = SqlState::ERRCODE_NOT_NULL_VIOLATION;
pub const DATETIME_FIELD_OVERFLOW: SqlState = SqlState::ERRCODE_DATETIME_FIELD_OVERFLOW;

#[track_caller]
pub fn ts_error(code: SqlState, message: &str, hint: &str) -> ! {
    let report = ErrorReport::new(code, message.to_string(), "tsbucket");
    let report = if hint.is_empty() { report } else { report.set_hint(hint.to_string()) };
    report.report(pgrx::PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}
