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
use crate::source::measurement::Keys;
use crate::source::{self, dump, Kind, Measurement, Parser, Record, Source, SourceError, TimeseriesOptions, Unit};

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
    /// Threads that parse and encode records.
    pub threads: usize,
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
    /// The file the records come from, where that is not the input itself
    /// (a dump directory's data file).
    data: Option<std::path::PathBuf>,
}

/// The size and the CRC-64 of the first MiB of the file records come from:
/// kept in the progress marker so that `--resume` refuses a file replaced
/// under the same name (it would pass over records it never committed).
fn fingerprint(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let size = std::fs::metadata(path)?.len();
    let mut head = Vec::with_capacity(1 << 20);
    std::fs::File::open(path)?.take(1 << 20).read_to_end(&mut head)?;
    let crc = source::archive::CRC64.checksum(&head);
    Ok(format!("{size} bytes, CRC-64 of the first MiB {crc:016x}"))
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
                data: None,
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
                // mongodump escapes the collection's name in its file names.
                name: dump::name_of_stem(&stem(&base)),
                described: format!("bson {}", o.input),
                data: None,
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
            let described = format!("mongodump {} {}.{}", o.input, c.db, c.name);
            Ok(Opened { source, options, name: c.name.clone(), described, data: Some(c.data.clone()) })
        }
        Kind::Archive => {
            if o.input != "-" && !o.dry_run {
                source::archive::verify(&o.input, o.collection.as_deref()).map_err(Failure::Input)?;
            }
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
            let described = format!("mongodump --archive {} {db}.{name}", o.input);
            Ok(Opened { source, options, name: name.clone(), described, data: None })
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


/// Work for an encoding thread: whole records, in input order by `seq`.
enum Job {
    /// Records read from the input (a read error ends the list).
    Records(u64, Vec<Result<Record, SourceError>>),
    /// Units the sample already parsed.
    Parsed(u64, Vec<Result<Unit, SourceError>>),
    /// The input cannot go on.
    Fail(u64, Failure),
}

/// An encoded job: its COPY text and counts, or where it failed.
struct Done {
    seq: u64,
    data: Vec<u8>,
    units: u64,
    rows: u64,
    skipped: u64,
    fail: Option<Failure>,
}

/// Records a job holds: enough to keep a thread busy, few enough to keep
/// batches close to their size. A bucket holds up to a thousand rows (and
/// a compressed one can be small), so a job of buckets holds fewer: what a
/// job's rows take as COPY text stays within a few tens of MB.
const JOB_RECORDS: usize = 256;
const JOB_BUCKETS: usize = 16;
const JOB_BYTES: usize = 1 << 20;
/// The largest COPY message the assembler passes on; with `AHEAD` of them
/// queued, the reader runs at most about 64 MB ahead of the server.
const CHUNK_BYTES: usize = 1 << 20;
const AHEAD: usize = 64;

/// Reads records, passing over the first `skip` (already committed), and
/// deals them out as jobs. Runs on the reader thread.
fn read_jobs(mut src: Box<dyn Source>, first: Vec<Result<Unit, SourceError>>, skip: u64, jobs: mpsc::SyncSender<Job>) {
    // A bucket weighs as many records as keep a job's rows near JOB_RECORDS' worth of buckets.
    let buckets = match src.parser() {
        Parser::Bson(Some(b)) => Some(b),
        _ => None,
    };
    let weight = |bytes: &[u8]| match &buckets {
        Some(b) if b.strict => JOB_RECORDS / JOB_BUCKETS,
        Some(b) => match bson::RawDocument::from_bytes(bytes) {
            Ok(raw) if source::bucket::is_bucket(raw, &b.time_field) => JOB_RECORDS / JOB_BUCKETS,
            _ => 1,
        },
        None => 1,
    };
    let mut seq = 0;
    if !first.is_empty() {
        if jobs.send(Job::Parsed(seq, first)).is_err() {
            return;
        }
        seq += 1;
    }
    let mut skipped = 0u64;
    while skipped < skip {
        match src.skip_unit() {
            None => {
                let m = format!("the input has {skipped} records, fewer than the {skip} an earlier run committed: it is not the input that run read");
                let _ = jobs.send(Job::Fail(seq, Failure::Usage(m)));
                return;
            }
            Some(Err(e)) if e.fatal => {
                let _ = jobs.send(Job::Fail(seq, Failure::Input(e)));
                return;
            }
            Some(_) => skipped += 1,
        }
    }
    loop {
        let mut records = Vec::new();
        let (mut bytes, mut weighed) = (0, 0);
        let mut end = false;
        while weighed < JOB_RECORDS && bytes < JOB_BYTES {
            match src.next_record() {
                None => {
                    end = true;
                    break;
                }
                Some(r) => {
                    let fatal = matches!(&r, Err(e) if e.fatal);
                    bytes += r.as_ref().map_or(0, |r| r.bytes.len());
                    weighed += r.as_ref().map_or(1, |r| weight(&r.bytes));
                    records.push(r);
                    if fatal {
                        end = true;
                        break;
                    }
                }
            }
        }
        if !records.is_empty() && jobs.send(Job::Records(seq, records)).is_err() {
            return;
        }
        seq += 1;
        if end {
            return;
        }
    }
}

/// Parses and encodes jobs until there are none. Runs on each encoding thread.
fn encode_jobs(jobs: std::sync::Arc<std::sync::Mutex<mpsc::Receiver<Job>>>, parser: Parser, mut enc: Encoder, skip_invalid: bool, done: mpsc::SyncSender<Done>) {
    let mut keys = Keys::default();
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let mut d = Done { seq: 0, data: Vec::new(), units: 0, rows: 0, skipped: 0, fail: None };
        let mut unit = |u: Result<Unit, SourceError>, d: &mut Done| -> Option<Failure> {
            d.units += 1;
            match u {
                Err(e) if skip_invalid && !e.fatal => {
                    d.skipped += 1;
                    None
                }
                Err(e) => Some(Failure::Input(e)),
                Ok(u) => {
                    for m in &u.docs {
                        match enc.encode(m, &mut d.data) {
                            Ok(()) => d.rows += 1,
                            Err(e) if skip_invalid && !e.conflict => d.skipped += 1,
                            Err(e) => return Some(Failure::Row { origin: u.origin.clone(), error: e }),
                        }
                    }
                    None
                }
            }
        };
        match job {
            Job::Fail(seq, f) => {
                d.seq = seq;
                d.fail = Some(f);
            }
            Job::Parsed(seq, units) => {
                d.seq = seq;
                for u in units {
                    if let Some(f) = unit(u, &mut d) {
                        d.fail = Some(f);
                        break;
                    }
                }
            }
            Job::Records(seq, records) => {
                d.seq = seq;
                for r in records {
                    if let Some(f) = unit(r.and_then(|r| parser.parse(&r, &mut keys)), &mut d) {
                        d.fail = Some(f);
                        break;
                    }
                }
            }
        }
        if done.send(d).is_err() {
            return;
        }
    }
}

/// Puts encoded jobs back in input order and cuts them into batches of whole
/// records: COPY data as it comes, then each batch's end and counts.
fn assemble(done: mpsc::Receiver<Done>, batch_rows: usize, tx: mpsc::SyncSender<Msg>) {
    let mut waiting = std::collections::BTreeMap::new();
    let mut next = 0u64;
    let (mut units, mut rows, mut skipped) = (0u64, 0u64, 0u64);
    // COPY text gathered into messages of up to CHUNK_BYTES, so that what
    // waits in the channel is bounded by bytes, not by jobs of any size.
    let mut out: Vec<u8> = Vec::with_capacity(CHUNK_BYTES);
    let flush = |out: &mut Vec<u8>| out.is_empty() || tx.send(Msg::Chunk(std::mem::replace(out, Vec::with_capacity(CHUNK_BYTES)))).is_ok();
    for d in done {
        waiting.insert(d.seq, d);
        while let Some(d) = waiting.remove(&next) {
            next += 1;
            if let Some(f) = d.fail {
                // The rows before the failure are in a batch that is never committed.
                let _ = tx.send(Msg::Fail(f));
                return;
            }
            for piece in d.data.chunks(CHUNK_BYTES) {
                if out.len() + piece.len() > CHUNK_BYTES && !flush(&mut out) {
                    return;
                }
                out.extend_from_slice(piece);
            }
            units += d.units;
            rows += d.rows;
            skipped += d.skipped;
            if rows as usize >= batch_rows {
                if !flush(&mut out) || tx.send(Msg::EndBatch { units, rows, skipped }).is_err() {
                    return;
                }
                (units, rows, skipped) = (0, 0, 0);
            }
        }
    }
    if units > 0 && flush(&mut out) {
        let _ = tx.send(Msg::EndBatch { units, rows, skipped });
    }
}

/// The pipeline from the source to COPY messages: a reader, `threads`
/// encoders, and the assembler that restores input order.
fn produce(src: Box<dyn Source>, first: Vec<Result<Unit, SourceError>>, skip: u64, enc: Encoder, o: &Options, tx: mpsc::SyncSender<Msg>) {
    let parser = src.parser();
    let threads = o.threads.max(1);
    let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(threads * 2);
    let (done_tx, done_rx) = mpsc::sync_channel::<Done>(threads * 2);
    // Owned by the encoders: when the last one stops (the assembler gave up),
    // the receiver goes and the reader's next send fails, so nothing waits forever.
    let jobs_rx = std::sync::Arc::new(std::sync::Mutex::new(jobs_rx));
    std::thread::scope(|scope| {
        scope.spawn(move || read_jobs(src, first, skip, jobs_tx));
        for _ in 0..threads {
            let (parser, enc, done_tx, jobs_rx) = (parser.clone(), enc.clone(), done_tx.clone(), jobs_rx.clone());
            let skip_invalid = o.skip_invalid;
            scope.spawn(move || encode_jobs(jobs_rx, parser, enc, skip_invalid, done_tx));
        }
        drop(done_tx);
        drop(jobs_rx);
        assemble(done_rx, o.batch_rows, tx);
    });
}

/// Reads the first documents (for inference); keeps what was read to send it.
fn sample(src: &mut dyn Source, want: usize, skip_invalid: bool) -> Result<(Vec<Result<Unit, SourceError>>, Vec<Measurement>), Failure> {
    let mut units = Vec::new();
    let mut docs = Vec::new();
    let mut keys = Keys::default();
    while docs.len() < want {
        match source::next_unit(src, &mut keys) {
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
    let Opened { mut source, options, name, described, data } = open(o)?;
    // Standard input has nothing to fingerprint.
    let data = data.or_else(|| (o.input != "-").then(|| o.input.clone().into()));
    let described = match &data {
        Some(path) => {
            let f = fingerprint(path).map_err(|e| Failure::Usage(format!("{}: cannot read: {e}", path.display())))?;
            format!("{described} ({f})")
        }
        None => described,
    };
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
    // Room for the reader to run ahead while the server stores a batch at its end.
    let (tx, rx) = mpsc::sync_channel::<Msg>(AHEAD);
    let skip = state.units;
    let enc = Encoder::new(schema);
    let show = o.progress.unwrap_or_else(|| std::io::stderr().is_terminal());
    let started = Instant::now();
    let mut summary = Summary { rows: state.rows, skipped: state.skipped, units: state.units, batches: 0 };
    let mut sent_bytes = 0u64;
    let mut rows_now = 0u64;
    let mut last_shown = Instant::now() - Duration::from_secs(1);
    let outcome = std::thread::scope(|scope| -> Result<(), Failure> {
        // Moved in: dropped when this closure returns, on an error too, so
        // that the producer's next send fails and the scope's join ends.
        let rx = rx;
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
            let copied = match copied {
                Ok(n) => n,
                Err(e) => {
                    let _ = conn.query("ROLLBACK");
                    return Err(match (failed, e) {
                        (Some(f), _) => f,
                        (None, CopyError::Pg(e)) => Failure::Server(format!("the server refused a batch (nothing of it is in): {e}")),
                        (None, CopyError::Input(m)) => Failure::Server(m),
                    });
                }
            };
            let (units, rows, skipped) = ended.unwrap_or_default();
            if copied != rows {
                let _ = conn.query("ROLLBACK");
                return Err(Failure::Server(format!("the server took {copied} rows of a batch of {rows}; nothing of it is in")));
            }
            let from = state.units;
            state.units += units;
            state.rows += rows;
            state.skipped += skipped;
            let moved = progress::update(&conn, schema_name.as_deref(), &target, from, &state).map_err(|e| {
                let _ = conn.query("ROLLBACK");
                server(e)
            })?;
            if !moved {
                let _ = conn.query("ROLLBACK");
                return Err(Failure::Usage(format!("another import into {target} moved its progress marker; this one stops (its last batch is not in)")));
            }
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
    if !progress::update(&conn, schema_name.as_deref(), &target, state.units, &state).map_err(server)? {
        return Err(Failure::Usage(format!("another import into {target} moved its progress marker")));
    }
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
