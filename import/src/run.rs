//! The import: open the input, infer (or reload) the mapping, create the
//! table, then send batches of whole source records, each in one transaction
//! with its progress marker. A reader thread parses and encodes the next batch
//! while the server takes the current one.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};


use crate::mapping::ddl;
use crate::mapping::encode::Encoder;
use crate::mapping::schema::{self, ColType, InferOptions, MetaAs, Schema};
use crate::pg::libpq::{Connection, CopyError};
use crate::pg::progress::{self, Progress};
use crate::source::bsonstream::{BsonSource, Buckets};
use crate::source::json::JsonSource;
use crate::source::{self, dump, Kind, Measurement, Source, SourceError, TimeseriesOptions, Unit};

/// What the command line asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub input: String,
    pub kind: Option<Kind>,
    pub conninfo: String,
    pub table: Option<String>,
    pub collection: Option<String>,
    pub time_field: Option<String>,
    pub meta_field: Option<String>,
    pub granularity: Option<String>,
    pub bucket_span: Option<i64>,
    pub expire_after: Option<i64>,
    pub meta_as: MetaAs,
    pub schema: BTreeMap<String, ColType>,
    pub rest_column: Option<String>,
    pub keep_id: bool,
    pub batch_rows: usize,
    pub sample: usize,
    pub resume: bool,
    pub dry_run: bool,
    pub skip_invalid: bool,
    pub progress: Option<bool>,
}

/// Why an import stopped.
#[derive(Debug)]
pub enum Failure {
    /// Bad input (file, offset, field).
    Input(SourceError),
    /// A row the mapping cannot take.
    Row { origin: source::Origin, error: crate::mapping::encode::RowError },
    /// The server refused something.
    Server(String),
    /// The command line, or the state of the target, does not allow the import.
    Usage(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e) => write!(f, "bad input: {e}"),
            Failure::Row { origin, error } => write!(f, "{origin}: {error}"),
            Failure::Server(m) => write!(f, "{m}"),
            Failure::Usage(m) => write!(f, "{m}"),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub rows: u64,
    pub skipped: u64,
    pub units: u64,
    pub batches: u64,
}

struct Opened {
    source: Box<dyn Source>,
    options: TimeseriesOptions,
    /// The collection's name, the default table name.
    name: String,
    described: String,
}

fn open(o: &Options) -> Result<Opened, Failure> {
    let kind = match o.kind {
        Some(k) => k,
        None => source::detect(&o.input).map_err(|e| Failure::Usage(format!("{}: cannot read: {e}", o.input)))?,
    };
    let cli_options = |name_hint: &str| -> Result<TimeseriesOptions, Failure> {
        let time_field = o.time_field.clone().ok_or_else(|| {
            Failure::Usage(format!(
                "{name_hint} carries no collection options: name the time field with --time-field (and the meta field with --meta-field)"
            ))
        })?;
        Ok(TimeseriesOptions {
            time_field,
            meta_field: o.meta_field.clone(),
            granularity: o.granularity.clone(),
            bucket_max_span_seconds: o.bucket_span,
            bucket_rounding_seconds: o.bucket_span,
            expire_after_seconds: o.expire_after,
        })
    };
    let stem = |p: &str| {
        let f = Path::new(p).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "imported".into());
        let f = f.trim_end_matches(".gz").to_string();
        let f = f.split('.').next().unwrap_or("imported").to_string();
        f
    };
    let open_err = |e: std::io::Error| Failure::Usage(format!("{}: cannot open: {e}", o.input));
    match kind {
        Kind::Json => {
            let options = cli_options("Extended JSON (mongoexport)")?;
            let s = source::open_stream(&o.input).map_err(open_err)?;
            Ok(Opened {
                source: Box::new(JsonSource::new(s, o.input.clone())),
                options,
                name: stem(&o.input),
                described: format!("mongoexport {}", o.input),
            })
        }
        Kind::Bson => {
            let fname = Path::new(&o.input).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let buckets_ns = fname.starts_with("system.buckets.");
            let base = fname.trim_start_matches("system.buckets.").to_string();
            // A metadata.json beside the data carries the options.
            let meta_path = Path::new(&o.input).with_file_name(format!(
                "{}.metadata.json{}",
                base.trim_end_matches(".gz").trim_end_matches(".bson"),
                if fname.ends_with(".gz") { ".gz" } else { "" }
            ));
            let mut from_metadata = false;
            let options = if o.input != "-" && meta_path.exists() {
                let opts = dump::read_metadata(&meta_path).map_err(Failure::Input)?;
                match TimeseriesOptions::from_collection_options(&opts) {
                    Some(t) => {
                        from_metadata = true;
                        overridden(t, o)
                    }
                    None => cli_options(&fname)?,
                }
            } else {
                cli_options(&fname)?
            };
            let s = source::open_stream(&o.input).map_err(open_err)?;
            let buckets = (buckets_ns || from_metadata).then(|| Buckets {
                time_field: options.time_field.clone(),
                meta_field: options.meta_field.clone(),
                strict: buckets_ns,
            });
            Ok(Opened {
                source: Box::new(BsonSource::new(s, o.input.clone(), buckets)),
                options,
                name: stem(&base),
                described: format!("bson {}", o.input),
            })
        }
        Kind::Dump => {
            let dir = Path::new(&o.input);
            let colls = dump::collections(dir).map_err(Failure::Input)?;
            let c = dump::choose(colls, o.collection.as_deref(), dir).map_err(Failure::Input)?;
            let options = match &c.options {
                Some(t) => overridden(t.clone(), o),
                None => cli_options(&format!("collection {}.{} (not a time-series collection)", c.db, c.name))?,
            };
            let source = dump::open(&c, &options).map_err(Failure::Input)?;
            Ok(Opened { source, options, name: c.name.clone(), described: format!("mongodump {} {}.{}", o.input, c.db, c.name) })
        }
        Kind::Archive => {
            let (source, options, db, name) =
                source::archive::open(&o.input, o.collection.as_deref()).map_err(Failure::Input)?;
            let (options, source) = match options {
                Some(t) => {
                    let t = overridden(t, o);
                    let s = source.with_options(&t);
                    (t, s)
                }
                None => (cli_options(&format!("collection {db}.{name} (not a time-series collection)"))?, Box::new(source) as Box<dyn Source>),
            };
            Ok(Opened { source, options, name: name.clone(), described: format!("mongodump --archive {} {db}.{name}", o.input) })
        }
    }
}

/// Options given on the command line win over the dump's.
fn overridden(mut t: TimeseriesOptions, o: &Options) -> TimeseriesOptions {
    if let Some(g) = &o.granularity {
        t.granularity = Some(g.clone());
        t.bucket_max_span_seconds = None;
        t.bucket_rounding_seconds = None;
    }
    if let Some(s) = o.bucket_span {
        t.bucket_max_span_seconds = Some(s);
        t.bucket_rounding_seconds = Some(s);
    }
    if let Some(e) = o.expire_after {
        t.expire_after_seconds = Some(e);
    }
    t
}

fn split_table(t: &str) -> (Option<String>, String) {
    match t.split_once('.') {
        Some((s, n)) => (Some(s.to_string()), n.to_string()),
        None => (None, t.to_string()),
    }
}

/// What the reader thread sends: COPY data as it is encoded, the end of a
/// batch (of whole source records) with its counts, or why it stopped.
enum Msg {
    Chunk(Vec<u8>),
    EndBatch { units: u64, rows: u64, skipped: u64 },
    Fail(Failure),
}

/// COPY data is sent in chunks of about this size, so that the server
/// stores rows while the next ones are parsed.
const CHUNK: usize = 1 << 20;

/// Reads units, skipping the first `skip` (already committed), and encodes
/// them into batches. Runs on the reader thread.
fn produce(
    mut src: Box<dyn Source>,
    first: Vec<Result<Unit, SourceError>>,
    skip: u64,
    mut enc: Encoder,
    o: &Options,
    tx: mpsc::SyncSender<Msg>,
) {
    let mut skipped_units = 0u64;
    // Records an earlier run committed: passed over, not decoded.
    while skipped_units < skip && first.is_empty() {
        match src.skip_unit() {
            None => break,
            Some(Err(e)) if e.fatal => {
                let _ = tx.send(Msg::Fail(Failure::Input(e)));
                return;
            }
            Some(_) => skipped_units += 1,
        }
    }
    let mut first = std::collections::VecDeque::from(first);
    let mut next = move || -> Option<Result<Unit, SourceError>> {
        if let Some(u) = first.pop_front() {
            return Some(u);
        }
        src.next_unit()
    };
    let (mut units, mut rows, mut skipped) = (0u64, 0u64, 0u64);
    let mut data = Vec::with_capacity(CHUNK + (64 << 10));
    loop {
        let unit = match next() {
            None => break,
            Some(u) => u,
        };
        if skipped_units < skip {
            // Already committed by an earlier run (it counted errors as records too).
            if let Err(e) = &unit
                && e.fatal
            {
                let _ = tx.send(Msg::Fail(Failure::Input(e.clone())));
                return;
            }
            skipped_units += 1;
            continue;
        }
        units += 1;
        match unit {
            Err(e) if o.skip_invalid && !e.fatal => {
                skipped += 1;
            }
            Err(e) => {
                let _ = tx.send(Msg::Fail(Failure::Input(e)));
                return;
            }
            Ok(u) => {
                for d in &u.docs {
                    match enc.encode(d, &mut data) {
                        Ok(()) => rows += 1,
                        Err(e) if o.skip_invalid && !e.conflict => skipped += 1,
                        Err(e) => {
                            let _ = tx.send(Msg::Fail(Failure::Row { origin: u.origin.clone(), error: e }));
                            return;
                        }
                    }
                }
            }
        }
        let end = rows as usize >= o.batch_rows;
        if (end || data.len() >= CHUNK) && !data.is_empty() {
            if tx.send(Msg::Chunk(std::mem::replace(&mut data, Vec::with_capacity(CHUNK + (64 << 10))))).is_err() {
                return;
            }
        }
        if end {
            if tx.send(Msg::EndBatch { units, rows, skipped }).is_err() {
                return;
            }
            (units, rows, skipped) = (0, 0, 0);
        }
    }
    if skipped_units < skip {
        let _ = tx.send(Msg::Fail(Failure::Usage(format!(
            "the input has {skipped_units} records, fewer than the {skip} an earlier run committed: it is not the input that run read"
        ))));
        return;
    }
    if units > 0 {
        if !data.is_empty() && tx.send(Msg::Chunk(data)).is_err() {
            return;
        }
        let _ = tx.send(Msg::EndBatch { units, rows, skipped });
    }
}

/// Reads the first documents (for inference); keeps what was read to send it.
fn sample(src: &mut dyn Source, want: usize, skip_invalid: bool) -> Result<(Vec<Result<Unit, SourceError>>, Vec<Measurement>), Failure> {
    let mut units = Vec::new();
    let mut docs = Vec::new();
    while docs.len() < want {
        match src.next_unit() {
            None => break,
            Some(Ok(u)) => {
                docs.extend(u.docs.iter().take(want - docs.len()).cloned());
                units.push(Ok(u));
            }
            Some(Err(e)) if e.fatal || !skip_invalid => return Err(Failure::Input(e)),
            Some(Err(e)) => units.push(Err(e)),
        }
    }
    Ok((units, docs))
}

pub fn run(o: &Options, log: &mut dyn Write) -> Result<Summary, Failure> {
    let Opened { mut source, options, name, described } = open(o)?;
    let table = o.table.clone().unwrap_or(name);
    let (schema_name, table_name) = split_table(&table);
    let target = ddl::qualified(schema_name.as_deref(), &table_name);
    if o.dry_run {
        let (_, docs) = sample(&mut *source, o.sample, o.skip_invalid)?;
        let s = infer(&docs, &options, o);
        let _ = writeln!(log, "-- {described}: mapping inferred from the first {} documents", docs.len());
        let _ = writeln!(log, "{};\n{};", ddl::create_table(&target, &s), ddl::create_timeseries(&target, &s, &options));
        for c in &s.columns {
            let _ = writeln!(log, "--   {:<24} {:<12} <- {}", c.name, c.ty.sql(), describe_from(&c.from, &options));
        }
        return Ok(Summary::default());
    }
    let conn = Connection::connect(&o.conninfo).map_err(|e| Failure::Server(format!("cannot connect: {e}")))?;
    let server = |e: crate::pg::libpq::PgError| Failure::Server(e.to_string());
    let existing = progress::read(&conn, schema_name.as_deref(), &target).map_err(server)?;
    let (schema, first, mut state) = match (existing, o.resume) {
        (Some(p), _) if p.finished => {
            return Err(Failure::Usage(format!(
                "{target} was already imported ({} rows from {}); drop the table (and its row in {}) to import it again",
                p.rows,
                p.source,
                progress::table(schema_name.as_deref())
            )));
        }
        (Some(p), true) => {
            let s: Schema = serde_json::from_str(&p.mapping)
                .map_err(|e| Failure::Usage(format!("the progress marker's mapping cannot be read: {e}")))?;
            if p.source != described {
                return Err(Failure::Usage(format!(
                    "{target} was being imported from {}, not {described}; resume with the same input",
                    p.source
                )));
            }
            let _ = writeln!(log, "resuming {target}: {} rows of {} records already in", p.rows, p.units);
            (s, Vec::new(), p)
        }
        (Some(p), false) => {
            return Err(Failure::Usage(format!(
                "an import into {target} stopped after {} rows; continue it with --resume (or drop the table and its row in {} to start over)",
                p.rows,
                progress::table(schema_name.as_deref())
            )));
        }
        (None, true) => return Err(Failure::Usage(format!("nothing to resume: no import into {target} was started"))),
        (None, false) => {
            let (units, docs) = sample(&mut *source, o.sample, o.skip_invalid)?;
            let s = infer(&docs, &options, o);
            let mapping = serde_json::to_string(&s).unwrap_or_default();
            let p = Progress { source: described.clone(), mapping, units: 0, rows: 0, skipped: 0, finished: false };
            let create = format!(
                "BEGIN;\n{};\n{};\n{};",
                ddl::create_table(&target, &s),
                ddl::create_timeseries(&target, &s, &options),
                progress::create_table_sql(schema_name.as_deref())
            );
            conn.query(&create).map_err(|e| {
                let _ = conn.query("ROLLBACK");
                server(e)
            })?;
            progress::insert(&conn, schema_name.as_deref(), &target, &p).map_err(|e| {
                let _ = conn.query("ROLLBACK");
                server(e)
            })?;
            conn.query("COMMIT").map_err(server)?;
            (s, units, p)
        }
    };
    let copy_sql = ddl::copy(&target, &schema);
    // A few chunks in flight: the reader encodes while the server stores.
    let (tx, rx) = mpsc::sync_channel::<Msg>(4);
    let skip = state.units;
    let enc = Encoder::new(schema);
    let show = o.progress.unwrap_or_else(|| std::io::stderr().is_terminal());
    let started = Instant::now();
    let mut summary = Summary { rows: state.rows, skipped: state.skipped, units: state.units, batches: 0 };
    let mut sent_bytes = 0u64;
    let mut rows_now = 0u64;
    let mut last_shown = Instant::now() - Duration::from_secs(1);
    let outcome = std::thread::scope(|scope| -> Result<(), Failure> {
        let o2 = o.clone();
        scope.spawn(move || produce(source, first, skip, enc, &o2, tx));
        loop {
            let mut pending = match rx.recv() {
                Ok(Msg::Fail(f)) => return Err(f),
                Ok(m) => Some(m),
                // The reader is done: every batch went in.
                Err(_) => break,
            };
            conn.query("BEGIN").map_err(server)?;
            let mut ended = None;
            let mut failed = None;
            let copied = conn.copy_in(&copy_sql, &mut |send| {
                loop {
                    let m = match pending.take() {
                        Some(m) => m,
                        None => rx.recv().map_err(|_| "the reader stopped inside a batch".to_string())?,
                    };
                    match m {
                        Msg::Chunk(d) => {
                            send(&d).map_err(|e| e.to_string())?;
                            sent_bytes += d.len() as u64;
                            if show && last_shown.elapsed() >= Duration::from_millis(250) {
                                last_shown = Instant::now();
                                let secs = started.elapsed().as_secs_f64().max(1e-3);
                                let _ = write!(
                                    std::io::stderr(),
                                    "\r{} rows committed  {:.1} MB sent  {:.0} rows/s  {:.1} MB/s   ",
                                    state.rows,
                                    sent_bytes as f64 / 1e6,
                                    rows_now as f64 / secs,
                                    sent_bytes as f64 / 1e6 / secs
                                );
                            }
                        }
                        Msg::EndBatch { units, rows, skipped } => {
                            ended = Some((units, rows, skipped));
                            return Ok(());
                        }
                        Msg::Fail(f) => {
                            let text = f.to_string();
                            failed = Some(f);
                            // Aborts the COPY: nothing of this batch stays.
                            return Err(text);
                        }
                    }
                }
            });
            if let Err(e) = copied {
                let _ = conn.query("ROLLBACK");
                return Err(match (failed, e) {
                    (Some(f), _) => f,
                    (None, CopyError::Pg(e)) => Failure::Server(format!("the server refused a batch (nothing of it is in): {e}")),
                    (None, CopyError::Input(m)) => Failure::Server(m),
                });
            }
            let (units, rows, skipped) = ended.unwrap_or_default();
            state.units += units;
            state.rows += rows;
            state.skipped += skipped;
            progress::update(&conn, schema_name.as_deref(), &target, &state).map_err(|e| {
                let _ = conn.query("ROLLBACK");
                server(e)
            })?;
            conn.query("COMMIT").map_err(server)?;
            summary.rows = state.rows;
            summary.skipped = state.skipped;
            summary.units = state.units;
            summary.batches += 1;
            rows_now += rows;
        }
        Ok(())
    });
    if show {
        let _ = writeln!(std::io::stderr());
    }
    outcome?;
    state.finished = true;
    progress::update(&conn, schema_name.as_deref(), &target, &state).map_err(server)?;
    Ok(summary)
}

fn infer(docs: &[Measurement], options: &TimeseriesOptions, o: &Options) -> Schema {
    schema::infer(
        docs,
        &InferOptions {
            time_field: &options.time_field,
            meta_field: options.meta_field.as_deref(),
            meta_as: o.meta_as,
            keep_id: o.keep_id,
            rest_column: o.rest_column.as_deref(),
            fixed: &o.schema,
        },
    )
}

fn describe_from(f: &schema::From, o: &TimeseriesOptions) -> String {
    let meta = o.meta_field.as_deref().unwrap_or("");
    match f {
        schema::From::Time => format!("{} (time field)", o.time_field),
        schema::From::Meta => format!("{meta} (meta field)"),
        schema::From::MetaSub(s) => format!("{meta}.{s} (meta subfield)"),
        schema::From::Field(s) => s.clone(),
        schema::From::Rest => "every other field".into(),
    }
}
