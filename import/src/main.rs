//! The command line of tsbucket-import.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};

use tsbucket_import::mapping::schema::{ColType, MetaAs};
use tsbucket_import::run::{self, Failure, Options};
use tsbucket_import::source::Kind;

// glibc's malloc was an eighth of the CPU time of an import: every value
// parsed is a small allocation, freed on another thread.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
    Json,
    Bson,
    Dump,
    Archive,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MetaAsArg {
    Columns,
    Jsonb,
}

/// Imports a MongoDB time-series collection into a tsbucket table, over
/// `COPY ... FROM STDIN` (no superuser, no file on the server).
///
/// INPUT is mongoexport's output (Extended JSON, lines or --jsonArray), a
/// mongodump directory (plain or --gzip), one dumped .bson file, or a
/// `mongodump --archive` file; `-` reads standard input. The table is created
/// `USING tsbucket` with the collection's time-series options; its columns are
/// inferred from the first documents (see --schema). Each batch commits in one
/// transaction with the import's progress (table `tsbucket_import` in the
/// target's schema), so an interrupted import continues with --resume.
#[derive(Debug, Parser)]
#[command(name = "tsbucket-import", version, after_help = EXAMPLES)]
struct Cli {
    /// The input: a file, a mongodump directory, or - for standard input.
    input: String,

    /// Connection string or URI, as psql takes it (default: the PG* variables).
    #[arg(short = 'd', long = "dbname", default_value = "")]
    conninfo: String,

    /// Target table, [schema.]name (default: the collection's name).
    #[arg(short, long)]
    table: Option<String>,

    /// What INPUT holds (default: guessed from its name and first bytes).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,

    /// In a dump or archive holding several collections: [db.]collection.
    #[arg(short, long)]
    collection: Option<String>,

    /// The time field (required for input without collection options: mongoexport, a lone .bson).
    #[arg(long)]
    time_field: Option<String>,

    /// The meta field (for input without collection options).
    #[arg(long)]
    meta_field: Option<String>,

    /// Bucket granularity: seconds, minutes or hours (overrides the dump's).
    #[arg(long)]
    granularity: Option<String>,

    /// Custom bucket span in seconds (MongoDB's bucketMaxSpanSeconds = bucketRoundingSeconds).
    #[arg(long)]
    bucket_span: Option<i64>,

    /// Expire buckets older than this many seconds (MongoDB's expireAfterSeconds).
    #[arg(long)]
    expire_after: Option<i64>,

    /// An object meta field: each subfield its own column, or one jsonb column.
    #[arg(long, value_enum, default_value = "columns")]
    meta_as: MetaAsArg,

    /// Fix a column's type: FIELD=TYPE (float8, int4, int8, numeric, text, bool,
    /// timestamptz, jsonb); META.SUB=TYPE for a meta subfield. Repeatable, or comma-separated.
    #[arg(long, value_delimiter = ',')]
    schema: Vec<String>,

    /// The jsonb column for fields no typed column takes (nested, mixed, or new).
    #[arg(long, default_value = "doc")]
    rest_column: String,

    /// No rest column: a field the first documents lacked stops the import.
    #[arg(long)]
    no_rest_column: bool,

    /// Keep `_id` (as a column of its own).
    #[arg(long)]
    keep_id: bool,

    /// Rows per batch (one transaction each).
    #[arg(long, default_value_t = 100_000)]
    batch_rows: usize,

    /// Documents read to infer the columns.
    #[arg(long, default_value_t = 1000)]
    sample: usize,

    /// Continue an import that stopped, after its last committed batch.
    #[arg(long)]
    resume: bool,

    /// Print the table that would be created, and stop.
    #[arg(long)]
    dry_run: bool,

    /// Skip bad records (counted) instead of stopping; a truncated file still stops.
    #[arg(long)]
    skip_invalid: bool,

    /// Threads that parse and encode (default: the machine's cores, at most 8).
    #[arg(long)]
    threads: Option<usize>,

    /// Show progress (default: when standard error is a terminal).
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,

    /// Never show progress.
    #[arg(long)]
    no_progress: bool,
}

const EXAMPLES: &str = "Examples:
  mongoexport --db iot --collection weather --out weather.json
  tsbucket-import weather.json -d postgres://me@db/iot --time-field ts --meta-field sensor

  mongodump --db iot --collection weather --gzip --out dump/
  tsbucket-import dump/iot --table weather --dry-run
  tsbucket-import dump/iot --table weather -d 'dbname=iot'
  tsbucket-import dump/iot --table weather -d 'dbname=iot' --resume   # after an interruption";

fn parse_schema(items: &[String]) -> Result<BTreeMap<String, ColType>, String> {
    let mut out = BTreeMap::new();
    for item in items.iter().filter(|s| !s.trim().is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(|| format!("--schema {item}: expected FIELD=TYPE"))?;
        let t = ColType::parse(v.trim()).ok_or_else(|| {
            format!("--schema {item}: unknown type \"{v}\" (float8, int4, int8, numeric, text, bool, timestamptz, jsonb)")
        })?;
        out.insert(k.trim().to_string(), t);
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let schema = match parse_schema(&cli.schema) {
        Ok(s) => s,
        Err(m) => {
            eprintln!("tsbucket-import: {m}");
            return ExitCode::from(2);
        }
    };
    let o = Options {
        input: cli.input,
        kind: cli.format.map(|f| match f {
            FormatArg::Json => Kind::Json,
            FormatArg::Bson => Kind::Bson,
            FormatArg::Dump => Kind::Dump,
            FormatArg::Archive => Kind::Archive,
        }),
        conninfo: cli.conninfo,
        table: cli.table,
        collection: cli.collection,
        time_field: cli.time_field,
        meta_field: cli.meta_field,
        granularity: cli.granularity,
        bucket_span: cli.bucket_span,
        expire_after: cli.expire_after,
        meta_as: match cli.meta_as {
            MetaAsArg::Columns => MetaAs::Columns,
            MetaAsArg::Jsonb => MetaAs::Jsonb,
        },
        schema,
        rest_column: (!cli.no_rest_column).then_some(cli.rest_column),
        keep_id: cli.keep_id,
        batch_rows: cli.batch_rows.max(1),
        sample: cli.sample.max(1),
        resume: cli.resume,
        dry_run: cli.dry_run,
        skip_invalid: cli.skip_invalid,
        progress: if cli.no_progress { Some(false) } else if cli.progress { Some(true) } else { None },
        threads: cli.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get().min(8))),
    };
    let mut out = std::io::stdout();
    match run::run(&o, &mut out) {
        Ok(s) => {
            if !o.dry_run {
                let skipped = if s.skipped > 0 { format!(", {} invalid records skipped", s.skipped) } else { String::new() };
                eprintln!("tsbucket-import: {} rows in ({} source records, {} batches this run){skipped}", s.rows, s.units, s.batches);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tsbucket-import: {e}");
            ExitCode::from(match e {
                Failure::Usage(_) => 2,
                _ => 1,
            })
        }
    }
}
