//! The one place that calls libpq. Connecting through libpq itself gives the
//! importer psql's conventions for free: URIs and `key=value` strings, the
//! `PG*` environment variables, `.pgpass`, service files, SSL settings.

use std::ffi::{CStr, CString, c_char};
use std::ptr::NonNull;

use pq_sys as pq;

/// A server error (or a connection failure) as psql would report it.
#[derive(Debug, Clone, PartialEq)]
pub struct PgError {
    pub sqlstate: Option<String>,
    pub message: String,
    pub hint: Option<String>,
}

impl std::fmt::Display for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.sqlstate {
            Some(s) => write!(f, "{} (SQLSTATE {s})", self.message.trim_end())?,
            None => write!(f, "{}", self.message.trim_end())?,
        }
        if let Some(h) = &self.hint {
            write!(f, "\nHINT: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PgError {}

fn plain(message: impl Into<String>) -> PgError {
    PgError { sqlstate: None, message: message.into(), hint: None }
}

pub struct Connection {
    conn: NonNull<pq::PGconn>,
}

/// Rows of a query's result, as text (NULL as None).
pub type Rows = Vec<Vec<Option<String>>>;

struct PgResult(NonNull<pq::PGresult>);

impl Drop for PgResult {
    fn drop(&mut self) {
        // SAFETY: the result came from libpq and is cleared exactly once, here.
        unsafe { pq::PQclear(self.0.as_ptr()) }
    }
}

impl PgResult {
    fn status(&self) -> pq::ExecStatusType {
        // SAFETY: a live result.
        unsafe { pq::PQresultStatus(self.0.as_ptr()) }
    }

    fn field(&self, code: u8) -> Option<String> {
        // SAFETY: a live result; libpq returns NULL or a string owned by the result.
        let p = unsafe { pq::PQresultErrorField(self.0.as_ptr(), code as i32) };
        // SAFETY: non-null pointers from PQresultErrorField are NUL-terminated.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    fn error(&self) -> PgError {
        // SAFETY: a live result; the message is owned by it.
        let msg = unsafe { CStr::from_ptr(pq::PQresultErrorMessage(self.0.as_ptr())) };
        PgError {
            sqlstate: self.field(b'C'),
            message: self.field(b'M').unwrap_or_else(|| msg.to_string_lossy().into_owned()),
            hint: self.field(b'H'),
        }
    }

    fn rows(&self) -> Rows {
        let r = self.0.as_ptr();
        // SAFETY: a live result.
        let (n, m) = unsafe { (pq::PQntuples(r), pq::PQnfields(r)) };
        (0..n)
            .map(|i| {
                (0..m)
                    .map(|j| {
                        // SAFETY: i and j are within the result's bounds; values are NUL-terminated text.
                        unsafe {
                            if pq::PQgetisnull(r, i, j) != 0 {
                                None
                            } else {
                                Some(CStr::from_ptr(pq::PQgetvalue(r, i, j)).to_string_lossy().into_owned())
                            }
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

impl Connection {
    /// `conninfo` as psql takes it (empty: everything from `PG*` variables).
    pub fn connect(conninfo: &str) -> Result<Connection, PgError> {
        let c = CString::new(conninfo).map_err(|_| plain("the connection string contains a NUL byte"))?;
        // SAFETY: a valid C string; libpq returns NULL only when out of memory.
        let raw = unsafe { pq::PQconnectdb(c.as_ptr()) };
        let conn = NonNull::new(raw).ok_or_else(|| plain("out of memory while connecting"))?;
        let this = Connection { conn };
        // SAFETY: a live connection.
        if unsafe { pq::PQstatus(this.conn.as_ptr()) } != pq::ConnStatusType::CONNECTION_OK {
            return Err(plain(this.last_error()));
        }
        // COPY text is UTF-8 whatever the database's encoding (the server
        // converts), literals are standard, and the importer's own IF NOT
        // EXISTS notices are not the user's concern.
        this.query("SET client_encoding TO 'UTF8'; SET standard_conforming_strings TO on; SET client_min_messages TO warning")?;
        Ok(this)
    }

    fn last_error(&self) -> String {
        // SAFETY: a live connection; the message is owned by it.
        unsafe { CStr::from_ptr(pq::PQerrorMessage(self.conn.as_ptr())) }.to_string_lossy().trim_end().to_owned()
    }

    fn result(&self, raw: *mut pq::PGresult) -> Result<PgResult, PgError> {
        NonNull::new(raw).map(PgResult).ok_or_else(|| plain(self.last_error()))
    }

    /// Runs one or more statements; returns the last one's rows.
    pub fn query(&self, sql: &str) -> Result<Rows, PgError> {
        let c = CString::new(sql).map_err(|_| plain("a statement contains a NUL byte"))?;
        // SAFETY: a live connection and a valid C string.
        let res = self.result(unsafe { pq::PQexec(self.conn.as_ptr(), c.as_ptr()) })?;
        match res.status() {
            pq::ExecStatusType::PGRES_TUPLES_OK | pq::ExecStatusType::PGRES_COMMAND_OK => Ok(res.rows()),
            _ => Err(res.error()),
        }
    }

    /// Runs one statement with text parameters ($1, $2, ...).
    pub fn query_params(&self, sql: &str, params: &[Option<&str>]) -> Result<Rows, PgError> {
        let c = CString::new(sql).map_err(|_| plain("a statement contains a NUL byte"))?;
        let owned: Vec<Option<CString>> = params
            .iter()
            .map(|p| p.map(CString::new).transpose())
            .collect::<Result<_, _>>()
            .map_err(|_| plain("a parameter contains a NUL byte"))?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|p| p.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())).collect();
        // SAFETY: a live connection; `ptrs` holds `params.len()` pointers to C
        // strings (or NULL) that outlive the call; NULL types, lengths and
        // formats mean text parameters of inferred types.
        let raw = unsafe {
            pq::PQexecParams(
                self.conn.as_ptr(),
                c.as_ptr(),
                ptrs.len() as i32,
                std::ptr::null(),
                ptrs.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            )
        };
        let res = self.result(raw)?;
        match res.status() {
            pq::ExecStatusType::PGRES_TUPLES_OK | pq::ExecStatusType::PGRES_COMMAND_OK => Ok(res.rows()),
            _ => Err(res.error()),
        }
    }

    /// `COPY ... FROM STDIN`, fed by `fill`, which writes chunks through the
    /// callback it is given. Returns the number of rows copied.
    pub fn copy_in(
        &self,
        sql: &str,
        fill: &mut dyn FnMut(&mut dyn FnMut(&[u8]) -> Result<(), PgError>) -> Result<(), String>,
    ) -> Result<u64, CopyError> {
        let c = CString::new(sql).map_err(|_| CopyError::Pg(plain("a statement contains a NUL byte")))?;
        // SAFETY: a live connection and a valid C string.
        let res = self.result(unsafe { pq::PQexec(self.conn.as_ptr(), c.as_ptr()) }).map_err(CopyError::Pg)?;
        if res.status() != pq::ExecStatusType::PGRES_COPY_IN {
            return Err(CopyError::Pg(res.error()));
        }
        drop(res);
        let conn = self.conn.as_ptr();
        let mut send = |data: &[u8]| -> Result<(), PgError> {
            // PQputCopyData takes an int length: slices well below its range.
            for chunk in data.chunks(1 << 20) {
                // SAFETY: a live connection in COPY IN state; the chunk's pointer and
                // length (at most 1 MiB) describe readable memory for the call's duration.
                let rc = unsafe { pq::PQputCopyData(conn, chunk.as_ptr() as *const c_char, chunk.len() as i32) };
                if rc != 1 {
                    return Err(plain(self.last_error()));
                }
            }
            Ok(())
        };
        let outcome = fill(&mut send);
        let abort = outcome.as_ref().err().map(|m| CString::new(m.replace('\0', " ")).unwrap_or_default());
        // SAFETY: a live connection in COPY IN state; a NULL message ends the
        // COPY, a message aborts it with that error.
        let rc = unsafe { pq::PQputCopyEnd(conn, abort.as_ref().map_or(std::ptr::null(), |m| m.as_ptr())) };
        if rc != 1 {
            return Err(CopyError::Pg(plain(self.last_error())));
        }
        // The COPY's own result, then the NULL that ends the command.
        let mut first: Option<Result<u64, PgError>> = None;
        loop {
            // SAFETY: a live connection.
            let raw = unsafe { pq::PQgetResult(conn) };
            let Some(r) = NonNull::new(raw).map(PgResult) else { break };
            if first.is_none() {
                first = Some(if r.status() == pq::ExecStatusType::PGRES_COMMAND_OK {
                    // SAFETY: a live result; the command tuple count is NUL-terminated text.
                    let n = unsafe { CStr::from_ptr(pq::PQcmdTuples(r.0.as_ptr())) };
                    Ok(n.to_str().ok().and_then(|s| s.parse().ok()).unwrap_or(0))
                } else {
                    Err(r.error())
                });
            }
        }
        match (outcome, first) {
            (Err(m), _) => Err(CopyError::Input(m)),
            (Ok(()), Some(Ok(n))) => Ok(n),
            (Ok(()), Some(Err(e))) => Err(CopyError::Pg(e)),
            (Ok(()), None) => Err(CopyError::Pg(plain(self.last_error()))),
        }
    }
}

#[derive(Debug)]
pub enum CopyError {
    /// The server refused the rows (or the connection broke).
    Pg(PgError),
    /// The input failed while the rows were being sent; the COPY was aborted.
    Input(String),
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: the connection came from PQconnectdb and is finished exactly once, here.
        unsafe { pq::PQfinish(self.conn.as_ptr()) }
    }
}

