//! `highwater-dump-log`: inspect Kafka-format log directories, like Kafka's
//! `kafka-dump-log` (whose flags `--files`, `--deep-iteration` and
//! `--print-data-log` it also takes). Reading commands never change the
//! files; `recover` runs recovery on a temporary copy.
//!
//! A path may be a partition directory (`<topic>-<partition>`), a broker's
//! log directory (every partition in it), a segment, index or checkpoint
//! file. A missing path, or a directory with nothing to inspect, is an
//! error, never an empty success.
//!
//! Exit codes: 0 all good, 1 problems found (invalid data, invalid indexes,
//! checkpoints that disagree with the log, or recovery would cut data), 2
//! usage or I/O errors.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use highwater::storage::batch::{RecordBatch, NO_PARTITION_LEADER_EPOCH};
use highwater::storage::checkpoint::{self, EpochEntry};
use highwater::storage::error::codec_name;
use highwater::storage::log_dir::{
    CLEAN_SHUTDOWN_MARKER, LOG_START_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_CHECKPOINT,
};
use highwater::storage::offset_index::OffsetIndex;
use highwater::storage::time_index::TimeIndex;
use highwater::storage::{
    check_segment, segment_bases, BatchHeader, EpochCache, Error, IndexCheck, LoadParams, Log,
    LogConfig, LogDir, TopicPartition,
};

/// `println!` that ends the program quietly when the reader of its output
/// has gone (`| head`), instead of panicking.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($t)*).is_err() {
            std::process::exit(0);
        }
    }};
}

#[derive(Parser)]
#[command(
    name = "highwater-dump-log",
    version,
    about = "Inspect Kafka-format log directories: segments, batches, records, indexes, checkpoints, recovery",
    after_help = "Kafka's kafka-dump-log flags work too: highwater-dump-log --files F1,F2 [--deep-iteration] [--print-data-log].\n\
                  Exit status: 0 all good, 1 problems found, 2 usage or I/O error.",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Kafka-style invocation (no subcommand): dump these files.
    #[command(flatten)]
    kafka: KafkaFlags,
}

/// The flags of Kafka's `kafka-dump-log`, for use without a subcommand.
#[derive(Args, Default)]
struct KafkaFlags {
    /// Comma-separated files (or directories) to dump.
    #[arg(long, value_delimiter = ',')]
    files: Vec<PathBuf>,
    /// Print every record, not just the batches.
    #[arg(long)]
    deep_iteration: bool,
    /// Print keys and values (implies --deep-iteration).
    #[arg(long)]
    print_data_log: bool,
}

#[derive(Subcommand)]
enum Command {
    /// List the segments of partition directories.
    Segments {
        /// Partition or log directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Print the batches (and with --records, the records) of partition or
    /// log directories, or of `.log`, `.index`, `.timeindex` or checkpoint files.
    Dump {
        /// Directories or files.
        paths: Vec<PathBuf>,
        /// Comma-separated directories or files (Kafka's flag).
        #[arg(long, value_delimiter = ',')]
        files: Vec<PathBuf>,
        /// Also print every record.
        #[arg(long, visible_alias = "deep-iteration")]
        records: bool,
        /// Print keys and values (as UTF-8, lossy); implies --records.
        #[arg(long, visible_alias = "print-data-log")]
        print_data: bool,
        /// Skip batches that end before this offset.
        #[arg(long, default_value_t = 0)]
        from_offset: u64,
        /// Stop after this many batches.
        #[arg(long)]
        max_batches: Option<u64>,
    },
    /// Check every batch (length, magic, CRC-32C, offsets, epochs), both
    /// indexes of every segment entry by entry, and the leader epoch
    /// checkpoint against the batches, of partition or log directories.
    Verify {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// `index.interval.bytes` the indexes were written with, to compare
        /// them with a rebuild.
        #[arg(long, default_value_t = 4096)]
        index_interval_bytes: u32,
    },
    /// Show the checkpoint files: the HW (replication-offset-checkpoint),
    /// recovery points, log start offsets, each partition's leader epochs,
    /// and the clean-shutdown marker.
    Checkpoints {
        /// Log directories, or partition directories (their log directory's
        /// entries for them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Show several replicas of a partition side by side (the brokers a
    /// replay leaves behind): checkpoints, epochs, and each offset's epoch
    /// and key, rows where they differ marked with `*`.
    Compare {
        /// Partition directories, or log directories holding one partition
        /// (or `--partition`).
        #[arg(required = true, num_args = 2..)]
        paths: Vec<PathBuf>,
        /// The partition directory name to take from each log directory.
        #[arg(long)]
        partition: Option<String>,
    },
    /// Run recovery on a temporary copy and report what it would cut.
    Recover {
        dir: PathBuf,
        /// Recovery point to assume; by default read from the
        /// `recovery-point-offset-checkpoint` beside the directory, else 0.
        #[arg(long)]
        recovery_point: Option<u64>,
        /// Assume a clean shutdown (only indexes and the tail are checked).
        #[arg(long)]
        clean: bool,
        /// Allow cutting data below the recovery point (or data Kafka keeps).
        #[arg(long)]
        allow_truncation_below_recovery_point: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None if cli.kafka.files.is_empty() => Err(usage(
            "give a subcommand (see --help) or Kafka's --files F1,F2",
        )),
        None => {
            let k = cli.kafka;
            let records = k.deep_iteration || k.print_data_log;
            dump(&k.files, records, k.print_data_log, 0, None)
        }
        Some(Command::Segments { paths }) => each_partition(&paths, segments),
        Some(Command::Dump {
            mut paths,
            files,
            records,
            print_data,
            from_offset,
            max_batches,
        }) => {
            paths.extend(files);
            if paths.is_empty() {
                Err(usage("dump needs a path (or --files)"))
            } else {
                dump(
                    &paths,
                    records || print_data,
                    print_data,
                    from_offset,
                    max_batches,
                )
            }
        }
        Some(Command::Verify {
            paths,
            index_interval_bytes,
        }) => each_partition(&paths, |p| verify(p, index_interval_bytes)),
        Some(Command::Checkpoints { paths }) => checkpoints(&paths),
        Some(Command::Compare { paths, partition }) => compare(&paths, partition.as_deref()),
        Some(Command::Recover {
            dir,
            recovery_point,
            clean,
            allow_truncation_below_recovery_point,
        }) => partition_dir(&dir).and_then(|d| {
            recover(
                &d,
                recovery_point,
                clean,
                allow_truncation_below_recovery_point,
            )
        }),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("highwater-dump-log: {e}");
            ExitCode::from(2)
        }
    }
}

/// Why a command could not run (exit status 2).
enum Failure {
    Storage(Error),
    Usage(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Storage(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Storage(e) => write!(f, "{e}"),
            Failure::Usage(s) => f.write_str(s),
        }
    }
}

fn usage(msg: &str) -> Failure {
    Failure::Usage(msg.to_string())
}

fn not_found(path: &Path) -> Failure {
    Failure::Usage(format!("{}: no such file or directory", path.display()))
}

/// What a directory path names.
enum Target {
    /// A partition directory with segments.
    Partition(PathBuf),
    /// A broker log directory: its partition directories.
    LogDir(PathBuf, Vec<PathBuf>),
}

/// The partition directories in a log directory.
fn partitions_in(dir: &Path) -> Result<Vec<PathBuf>, Failure> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, "list directory", e))? {
        let e = e.map_err(|e| Error::io(dir, "list directory", e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() && TopicPartition::parse_dir_name(&name).is_ok() {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

fn resolve(path: &Path) -> Result<Target, Failure> {
    if !path.exists() {
        return Err(not_found(path));
    }
    if !path.is_dir() {
        return Err(usage(&format!(
            "{} is a file, not a directory",
            path.display()
        )));
    }
    if !segment_bases(path)?.is_empty() {
        return Ok(Target::Partition(path.to_path_buf()));
    }
    let parts = partitions_in(path)?;
    if !parts.is_empty() {
        return Ok(Target::LogDir(path.to_path_buf(), parts));
    }
    Err(usage(&format!(
        "{}: nothing to inspect: no segment files (.log) and no partition directories (<topic>-<partition>)",
        path.display()
    )))
}

/// A path that must be one partition directory.
fn partition_dir(path: &Path) -> Result<PathBuf, Failure> {
    match resolve(path)? {
        Target::Partition(p) => Ok(p),
        Target::LogDir(d, parts) => Err(usage(&format!(
            "{} is a log directory with {} partition(s); name one of them",
            d.display(),
            parts.len()
        ))),
    }
}

/// Runs `f` on every partition the paths name; fails on none.
fn each_partition(
    paths: &[PathBuf],
    mut f: impl FnMut(&Path) -> Result<bool, Failure>,
) -> Result<bool, Failure> {
    let mut ok = true;
    for path in paths {
        match resolve(path)? {
            Target::Partition(p) => ok &= f(&p)?,
            Target::LogDir(_, parts) => {
                for p in parts {
                    out!("== {}", p.display());
                    ok &= f(&p)?;
                }
            }
        }
    }
    Ok(ok)
}

fn segments(dir: &Path) -> Result<bool, Failure> {
    out!(
        "{:>20} {:>12} {:>10} {:>10}  file",
        "base offset",
        "bytes",
        "index",
        "timeindex"
    );
    for base in segment_bases(dir)? {
        let log = dir.join(highwater::storage::file_name(base, "log"));
        let len = |p: &Path| {
            fs::metadata(p)
                .map(|m| m.len().to_string())
                .unwrap_or_else(|_| "missing".into())
        };
        out!(
            "{:>20} {:>12} {:>10} {:>10}  {}",
            base,
            len(&log),
            len(&log.with_extension("index")),
            len(&log.with_extension("timeindex")),
            log.display()
        );
    }
    Ok(true)
}

fn print_batch(pos: u64, h: &BatchHeader) {
    let last_seq = if h.base_sequence < 0 {
        -1
    } else {
        h.base_sequence.wrapping_add(h.last_offset_delta)
    };
    out!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} position: {} \
         {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: true",
        h.base_offset,
        h.last_offset(),
        h.records_count,
        h.base_sequence,
        last_seq,
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        pos,
        if h.is_log_append_time() {
            "LogAppendTime"
        } else {
            "CreateTime"
        },
        h.max_timestamp,
        h.size(),
        h.magic,
        codec_name(h.compression()),
        h.crc
    );
}

fn print_records(bytes: &[u8], print_data: bool) {
    let Ok(batch) = RecordBatch::new(bytes) else {
        return;
    };
    // Kafka's DumpLogSegments names the batch's timestamp type on each record.
    let kind = if batch.header.is_log_append_time() {
        "LogAppendTime"
    } else {
        "CreateTime"
    };
    for r in batch.records() {
        match r {
            Ok((offset, rec)) => {
                let keys: Vec<&str> = rec.headers.iter().map(|h| h.key.as_str()).collect();
                let size = |b: &Option<Vec<u8>>| b.as_ref().map_or(-1, |v| v.len() as i64);
                let mut line = format!(
                    "| offset: {offset} {kind}: {} keySize: {} valueSize: {} headerKeys: {keys:?}",
                    rec.timestamp,
                    size(&rec.key),
                    size(&rec.value)
                );
                if print_data {
                    let text = |b: &Option<Vec<u8>>| {
                        b.as_ref()
                            .map_or("null".into(), |v| String::from_utf8_lossy(v).into_owned())
                    };
                    line.push_str(&format!(
                        " key: {} payload: {}",
                        text(&rec.key),
                        text(&rec.value)
                    ));
                }
                out!("{line}");
            }
            Err(e) => {
                out!("| {e}");
                break;
            }
        }
    }
}

fn dump(
    paths: &[PathBuf],
    records: bool,
    print_data: bool,
    from: u64,
    max: Option<u64>,
) -> Result<bool, Failure> {
    let mut ok = true;
    let mut left = max.unwrap_or(u64::MAX);
    for path in paths {
        if path.is_dir() {
            let parts = match resolve(path)? {
                Target::Partition(p) => vec![p],
                Target::LogDir(d, parts) => {
                    ok &= show_checkpoints(&d, None)?;
                    parts
                }
            };
            for part in parts {
                for base in segment_bases(&part)? {
                    out!(
                        "Dumping {}",
                        part.join(highwater::storage::file_name(base, "log"))
                            .display()
                    );
                    ok &= dump_log(&part, base, records, print_data, from, &mut left)?;
                }
            }
        } else {
            ok &= dump_file(path, records, print_data, from, &mut left)?;
        }
    }
    Ok(ok)
}

fn dump_file(
    path: &Path,
    records: bool,
    print_data: bool,
    from: u64,
    left: &mut u64,
) -> Result<bool, Failure> {
    if !path.exists() {
        return Err(not_found(path));
    }
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Some(kind) = checkpoint_kind(&name) {
        out!("Dumping {}", path.display());
        return print_checkpoint(path, kind);
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, ""));
    let base = highwater::storage::parse_base_offset(stem).ok_or_else(|| Error::BadFileName {
        path: path.to_path_buf(),
        reason: "a segment file is named by its base offset in 20 digits".into(),
    })?;
    out!("Dumping {}", path.display());
    match ext {
        "log" => dump_log(dir, base, records, print_data, from, left),
        "index" => {
            let bytes = fs::read(path).map_err(|e| Error::io(path, "read", e))?;
            match OffsetIndex::parse(&bytes, base, usize::MAX / 8, u64::MAX, None) {
                Ok(i) => {
                    for e in i.entries() {
                        out!(
                            "offset: {} position: {}",
                            base + u64::from(e.relative_offset),
                            e.position
                        );
                    }
                    Ok(true)
                }
                Err(reason) => {
                    out!("{}: invalid index: {reason}", path.display());
                    Ok(false)
                }
            }
        }
        "timeindex" => {
            let bytes = fs::read(path).map_err(|e| Error::io(path, "read", e))?;
            match TimeIndex::parse(&bytes, base, usize::MAX / 12, None) {
                Ok(t) => {
                    for e in t.entries() {
                        out!("timestamp: {} offset: {}", e.timestamp, e.offset);
                    }
                    Ok(true)
                }
                Err(reason) => {
                    out!("{}: invalid time index: {reason}", path.display());
                    Ok(false)
                }
            }
        }
        _ => Err(Error::BadFileName {
            path: path.to_path_buf(),
            reason: "expected a .log, .index, .timeindex or checkpoint file, or a directory".into(),
        }
        .into()),
    }
}

/// Which checkpoint a file name is: true for `topic partition offset`
/// entries, false for `epoch startOffset`.
fn checkpoint_kind(name: &str) -> Option<bool> {
    match name {
        RECOVERY_POINT_CHECKPOINT | REPLICATION_CHECKPOINT | LOG_START_CHECKPOINT => Some(true),
        highwater::storage::epoch_cache::FILE_NAME => Some(false),
        _ => None,
    }
}

fn print_checkpoint(path: &Path, offsets: bool) -> Result<bool, Failure> {
    let parsed = if offsets {
        checkpoint::read_offsets(path).map(|m| {
            m.map(|m| {
                m.iter()
                    .map(|(tp, o)| format!("{} {} {o}", tp.topic(), tp.partition()))
                    .collect::<Vec<_>>()
            })
        })
    } else {
        checkpoint::read_epochs(path).map(|e| {
            e.map(|e| {
                e.iter()
                    .map(|e| format!("epoch {} starts at {}", e.epoch, e.start_offset))
                    .collect()
            })
        })
    };
    match parsed {
        Ok(Some(lines)) => {
            for l in lines {
                out!("{l}");
            }
            Ok(true)
        }
        Ok(None) => Err(not_found(path)),
        Err(e @ Error::Checkpoint { .. }) => {
            out!("PROBLEM: {e}");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// Prints a log directory's checkpoints (every partition, or `only`).
fn show_checkpoints(log_dir: &Path, only: Option<&TopicPartition>) -> Result<bool, Failure> {
    let mut ok = true;
    for (name, what) in [
        (REPLICATION_CHECKPOINT, "high watermark"),
        (RECOVERY_POINT_CHECKPOINT, "recovery point"),
        (LOG_START_CHECKPOINT, "log start offset"),
    ] {
        let path = log_dir.join(name);
        match checkpoint::read_offsets(&path) {
            Ok(None) => out!("{name}: missing"),
            Ok(Some(m)) => {
                for (tp, o) in m.iter().filter(|(tp, _)| only.is_none_or(|t| t == *tp)) {
                    out!("{name}: {}-{} {what} {o}", tp.topic(), tp.partition());
                }
            }
            Err(e @ Error::Checkpoint { .. }) => {
                ok = false;
                out!("PROBLEM: {e}");
            }
            Err(e) => return Err(e.into()),
        }
    }
    let marker = log_dir.join(CLEAN_SHUTDOWN_MARKER);
    out!(
        "{CLEAN_SHUTDOWN_MARKER}: {}",
        if marker.exists() {
            "present (the next start skips recovery)"
        } else {
            "absent (the next start recovers from the recovery points)"
        }
    );
    Ok(ok)
}

fn checkpoints(paths: &[PathBuf]) -> Result<bool, Failure> {
    let mut ok = true;
    for path in paths {
        match resolve(path)? {
            Target::LogDir(d, parts) => {
                out!("== {}", d.display());
                ok &= show_checkpoints(&d, None)?;
                for p in parts {
                    ok &= show_epochs(&p)?;
                }
            }
            Target::Partition(p) => {
                out!("== {}", p.display());
                let tp = p
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| TopicPartition::parse_dir_name(n).ok());
                if let (Some(tp), Some(parent)) = (tp, p.parent()) {
                    ok &= show_checkpoints(parent, Some(&tp))?;
                }
                ok &= show_epochs(&p)?;
            }
        }
    }
    Ok(ok)
}

fn show_epochs(part: &Path) -> Result<bool, Failure> {
    let path = part.join(highwater::storage::epoch_cache::FILE_NAME);
    let name = part.file_name().unwrap_or_default().to_string_lossy();
    match checkpoint::read_epochs(&path) {
        Ok(None) => {
            out!("{name}/leader-epoch-checkpoint: missing");
            Ok(true)
        }
        Ok(Some(e)) => {
            out!("{name}/leader-epoch-checkpoint: {}", epochs_text(&e));
            Ok(true)
        }
        Err(e @ Error::Checkpoint { .. }) => {
            out!("PROBLEM: {e}");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

fn epochs_text(e: &[EpochEntry]) -> String {
    if e.is_empty() {
        return "none".into();
    }
    e.iter()
        .map(|e| format!("{}@{}", e.epoch, e.start_offset))
        .collect::<Vec<_>>()
        .join(" ")
}

fn dump_log(
    dir: &Path,
    base: u64,
    records: bool,
    print_data: bool,
    from: u64,
    left: &mut u64,
) -> Result<bool, Failure> {
    let mut on_batch = |pos: u64, bytes: &[u8], h: &BatchHeader| {
        if h.last_offset() < from || *left == 0 {
            return;
        }
        *left -= 1;
        print_batch(pos, h);
        if records {
            print_records(bytes, print_data);
        }
    };
    let check = check_segment(dir, base, &LogConfig::default(), Some(&mut on_batch))?;
    if let Some(p) = &check.problem {
        out!("{}: {p}", check.log_path.display());
        return Ok(false);
    }
    Ok(true)
}

fn verify(dir: &Path, index_interval_bytes: u32) -> Result<bool, Failure> {
    let config = LogConfig {
        index_interval_bytes,
        ..LogConfig::default()
    };
    let bases = segment_bases(dir)?;
    if bases.is_empty() {
        // Never "passed" on nothing.
        out!("{}: no segments: nothing verified", dir.display());
        return Ok(false);
    }
    let mut ok = true;
    let mut expected_base: Option<u64> = None;
    // Across the whole log: the epoch cache the batches describe.
    let mut epochs = EpochCache::new(dir, Vec::new());
    let mut batches = 0u64;
    for base in bases {
        let mut bad_epochs = Vec::new();
        let mut visit = |pos: u64, _: &[u8], h: &BatchHeader| {
            if h.partition_leader_epoch < NO_PARTITION_LEADER_EPOCH {
                bad_epochs.push((pos, h.partition_leader_epoch));
            }
            epochs.assign_in_memory(h.partition_leader_epoch, h.base_offset);
        };
        let c = check_segment(dir, base, &config, Some(&mut visit))?;
        batches += c.batches;
        let mut line = format!(
            "{}: {} batches, {} of {} bytes valid, offsets {}..{}",
            c.log_path.display(),
            c.batches,
            c.valid_bytes,
            c.size,
            c.base_offset,
            c.next_offset
        );
        if let Some(p) = &c.problem {
            ok = false;
            line.push_str(&format!("; PROBLEM: {p}"));
        }
        for (pos, e) in bad_epochs {
            ok = false;
            line.push_str(&format!(
                "; PROBLEM: batch at byte {pos} has leader epoch {e} (below -1)"
            ));
        }
        if let Some(e) = expected_base {
            if e != base {
                ok = false;
                line.push_str(&format!(
                    "; PROBLEM: segment starts at {base} but the previous one ends at {e}"
                ));
            }
        }
        for (what, ic) in [("index", &c.index), ("timeindex", &c.time_index)] {
            // An index problem names the index file, not the log.
            let file = c.log_path.with_extension(what);
            let what = file.display();
            match ic {
                IndexCheck::Valid {
                    entries,
                    matches_rebuilt,
                    preallocated,
                } => {
                    line.push_str(&format!("; {what} valid ({entries} entries"));
                    if *preallocated > 0 {
                        // As Kafka leaves an active segment's index: room,
                        // trimmed when the segment rolls.
                        line.push_str(&format!(
                            ", then {preallocated} preallocated empty slots (as Kafka leaves an active segment's index until it rolls)"
                        ));
                    }
                    if !matches_rebuilt {
                        line.push_str(", differs from a rebuild");
                    }
                    line.push(')');
                }
                IndexCheck::Missing => {
                    ok = false;
                    line.push_str(&format!("; PROBLEM: {what} is missing"));
                }
                IndexCheck::Invalid(r) => {
                    ok = false;
                    line.push_str(&format!("; PROBLEM: {what} is invalid: {r}"));
                }
            }
        }
        out!("{line}");
        expected_base = Some(c.next_offset);
    }
    // The leader-epoch-checkpoint against every batch of the log.
    let path = dir.join(highwater::storage::epoch_cache::FILE_NAME);
    let (params, notes) = broker_params(dir);
    for n in &notes {
        out!("note: {n}");
    }
    let log_start = params.log_start_offset;
    epochs.truncate_from_start(log_start);
    match checkpoint::read_epochs(&path) {
        Ok(Some(file)) if file.as_slice() == epochs.entries() => {
            out!(
                "{}: matches the batches ({})",
                path.display(),
                epochs_text(&file)
            );
        }
        Ok(Some(file)) => {
            ok = false;
            out!(
                "{}: PROBLEM: says {} but the batches say {}",
                path.display(),
                epochs_text(&file),
                epochs_text(epochs.entries())
            );
        }
        Ok(None) => out!(
            "{}: missing (rebuilt from the batches on load)",
            path.display()
        ),
        Err(e) => {
            ok = false;
            out!("PROBLEM: {e}");
        }
    }
    out!(
        "{}",
        if ok {
            format!("verification passed: {batches} batches")
        } else {
            "verification FAILED".into()
        }
    );
    Ok(ok)
}

/// One replica's partition, read without changing it.
struct Replica {
    name: String,
    dir: PathBuf,
    records: Vec<(u64, i32, Option<Vec<u8>>)>,
    problem: Option<String>,
}

fn read_replica(dir: &Path, name: String) -> Result<Replica, Failure> {
    let mut records = Vec::new();
    let mut problem = None;
    for base in segment_bases(dir)? {
        let mut visit = |_: u64, bytes: &[u8], h: &BatchHeader| {
            let Ok(b) = RecordBatch::new(bytes) else {
                return;
            };
            for r in b.records().flatten() {
                records.push((r.0, h.partition_leader_epoch, r.1.key));
            }
        };
        let c = check_segment(dir, base, &LogConfig::default(), Some(&mut visit))?;
        if let Some(p) = c.problem {
            problem.get_or_insert(format!("{}: {p}", c.log_path.display()));
        }
    }
    Ok(Replica {
        name,
        dir: dir.to_path_buf(),
        records,
        problem,
    })
}

fn key_text(key: &Option<Vec<u8>>) -> String {
    match key {
        None => "null".into(),
        Some(k) if k.len() == 8 => {
            format!(
                "id {}",
                u64::from_be_bytes(k[..].try_into().expect("8 bytes"))
            )
        }
        Some(k) => match std::str::from_utf8(k) {
            Ok(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
            _ => k.iter().map(|b| format!("{b:02x}")).collect(),
        },
    }
}

fn compare(paths: &[PathBuf], partition: Option<&str>) -> Result<bool, Failure> {
    let mut replicas = Vec::new();
    for path in paths {
        let dir = match (resolve(path)?, partition) {
            (Target::Partition(p), _) => p,
            (Target::LogDir(d, _), Some(name)) => {
                let p = d.join(name);
                if !p.is_dir() {
                    return Err(not_found(&p));
                }
                p
            }
            (Target::LogDir(_, parts), None) if parts.len() == 1 => parts[0].clone(),
            (Target::LogDir(d, parts), None) => {
                return Err(usage(&format!(
                    "{} holds {} partitions; choose one with --partition",
                    d.display(),
                    parts.len()
                )))
            }
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        replicas.push(read_replica(&dir, name)?);
    }
    let width = replicas
        .iter()
        .map(|r| r.name.len())
        .chain(std::iter::once(18))
        .max()
        .unwrap_or(18);
    let row = |label: &str, cells: Vec<String>, mark: bool| {
        let mut line = format!("{label:<18}");
        for c in cells {
            line.push_str(&format!("  {c:<width$}"));
        }
        if mark {
            line.push_str("  *");
        }
        out!("{}", line.trim_end());
    };
    row("", replicas.iter().map(|r| r.name.clone()).collect(), false);
    let tp_of = |r: &Replica| {
        r.dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| TopicPartition::parse_dir_name(n).ok())
    };
    let mut ok = true;
    for (name, label) in [
        (REPLICATION_CHECKPOINT, "high watermark"),
        (RECOVERY_POINT_CHECKPOINT, "recovery point"),
        (LOG_START_CHECKPOINT, "log start offset"),
    ] {
        let mut cells = Vec::new();
        for r in &replicas {
            let v = match (tp_of(r), r.dir.parent()) {
                (Some(tp), Some(parent)) => match checkpoint::read_offsets(&parent.join(name)) {
                    Ok(m) => m
                        .and_then(|m| m.get(&tp).copied())
                        .map_or("-".into(), |o| o.to_string()),
                    Err(_) => {
                        ok = false;
                        "unreadable".into()
                    }
                },
                _ => "-".into(),
            };
            cells.push(v);
        }
        let differ = cells.windows(2).any(|w| w[0] != w[1]);
        row(label, cells, differ);
    }
    let ends: Vec<String> = replicas
        .iter()
        .map(|r| {
            r.records
                .last()
                .map_or("empty".into(), |l| (l.0 + 1).to_string())
        })
        .collect();
    let differ = ends.windows(2).any(|w| w[0] != w[1]);
    row("log end offset", ends, differ);
    let epochs: Vec<String> = replicas
        .iter()
        .map(|r| {
            match checkpoint::read_epochs(&r.dir.join(highwater::storage::epoch_cache::FILE_NAME)) {
                Ok(Some(e)) => epochs_text(&e),
                Ok(None) => "missing".into(),
                Err(_) => {
                    ok = false;
                    "unreadable".into()
                }
            }
        })
        .collect();
    let differ = epochs.windows(2).any(|w| w[0] != w[1]);
    row("leader epochs", epochs, differ);
    let markers: Vec<String> = replicas
        .iter()
        .map(|r| {
            let present = r
                .dir
                .parent()
                .is_some_and(|p| p.join(CLEAN_SHUTDOWN_MARKER).exists());
            if present { "clean" } else { "unclean" }.to_string()
        })
        .collect();
    row("last shutdown", markers, false);
    let offsets: std::collections::BTreeSet<u64> = replicas
        .iter()
        .flat_map(|r| r.records.iter().map(|x| x.0))
        .collect();
    for o in offsets {
        let cells: Vec<String> = replicas
            .iter()
            .map(|r| {
                r.records
                    .iter()
                    .find(|x| x.0 == o)
                    .map_or("-".into(), |(_, e, k)| format!("e{e} {}", key_text(k)))
            })
            .collect();
        let differ = cells.windows(2).any(|w| w[0] != w[1]);
        row(&format!("offset {o}"), cells, differ);
    }
    for r in &replicas {
        if let Some(p) = &r.problem {
            ok = false;
            out!("PROBLEM: {}: {p}", r.name);
        }
    }
    Ok(ok)
}

/// The load parameters of the partition at `dir` from the broker
/// checkpoints beside it, read as the library reads them
/// ([`LogDir::inspect`]: a checkpoint that does not parse or cannot be read
/// is ignored, with a note, and its defaults taken), and those notes. A
/// directory not named `<topic>-<partition>` has no checkpoints.
fn broker_params(dir: &Path) -> (LoadParams, Vec<String>) {
    let tp = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| TopicPartition::parse_dir_name(n).ok());
    let (Some(tp), Some(parent)) = (tp, dir.parent()) else {
        return (LoadParams::default(), Vec::new());
    };
    match LogDir::inspect(parent) {
        Ok(ld) => {
            let mut params = ld.load_params(&tp);
            // The caller decides whether this counts as a clean shutdown.
            params.clean_shutdown = false;
            (params, ld.repairs().to_vec())
        }
        Err(_) => (LoadParams::default(), Vec::new()),
    }
}

fn recover(dir: &Path, rp: Option<u64>, clean: bool, allow: bool) -> Result<bool, Failure> {
    // The checkpoints as the library loads them: a garbled or unreadable
    // one is reset with the same note, not a usage error.
    let (from_files, notes) = broker_params(dir);
    for n in &notes {
        out!("note: {n}");
    }
    let recovery_point = rp.unwrap_or(from_files.recovery_point);
    let tmp = tempfile::tempdir()
        .map_err(|e| Error::io(Path::new("temporary directory"), "create", e))?;
    let copy = tmp.path().join(dir.file_name().unwrap_or_default());
    fs::create_dir_all(&copy).map_err(|e| Error::io(&copy, "create", e))?;
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, "list", e))? {
        let entry = entry.map_err(|e| Error::io(dir, "list", e))?;
        if entry.path().is_file() {
            fs::copy(entry.path(), copy.join(entry.file_name()))
                .map_err(|e| Error::io(&entry.path(), "copy", e))?;
        }
    }
    out!(
        "Recovering a copy of {} (recovery point {recovery_point}{})",
        dir.display(),
        if clean { ", clean shutdown" } else { "" }
    );
    let config = LogConfig {
        truncate_below_recovery_point: allow,
        ..LogConfig::default()
    };
    // The HW and log start come from the checkpoints beside the directory,
    // as a broker would load them.
    let params = LoadParams {
        recovery_point,
        clean_shutdown: clean,
        high_watermark: from_files.high_watermark,
        log_start_offset: from_files.log_start_offset,
    };
    match Log::open(&copy, config, params) {
        Ok((_, report)) => {
            // Paths in the report name the copy; show the original's.
            let text = report
                .to_string()
                .replace(&copy.display().to_string(), &dir.display().to_string());
            print!("{text}");
            let cuts = report.bytes_truncated > 0 || !report.segments_removed.is_empty();
            out!(
                "{}",
                if cuts {
                    "recovery WOULD CUT data"
                } else {
                    "recovery would cut nothing"
                }
            );
            Ok(!cuts)
        }
        Err(e @ Error::CorruptBelowRecoveryPoint { .. }) => {
            out!(
                "{}",
                e.to_string()
                    .replace(&copy.display().to_string(), &dir.display().to_string())
            );
            out!("recovery WOULD REFUSE to open the log (pass --allow-truncation-below-recovery-point to see the cut)");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}
