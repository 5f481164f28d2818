//! `highwater-dump-log`: inspect a partition directory in Kafka's format,
//! like Kafka's `kafka-dump-log`. Reading commands never change the files;
//! `recover` runs recovery on a temporary copy.
//!
//! Exit codes: 0 all good, 1 problems found (invalid data, invalid indexes,
//! or recovery would cut data), 2 usage or I/O errors.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use highwater::storage::batch::RecordBatch;
use highwater::storage::checkpoint;
use highwater::storage::error::codec_name;
use highwater::storage::offset_index::OffsetIndex;
use highwater::storage::time_index::TimeIndex;
use highwater::storage::{
    check_segment, segment_bases, BatchHeader, Error, IndexCheck, LoadParams, Log, LogConfig,
    TopicPartition,
};

#[derive(Parser)]
#[command(
    name = "highwater-dump-log",
    version,
    about = "Inspect a Kafka-format partition directory: segments, batches, records, indexes, recovery",
    after_help = "Exit status: 0 all good, 1 problems found, 2 usage or I/O error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the segments of a partition directory.
    Segments {
        /// The partition directory (`<topic>-<partition>`).
        dir: PathBuf,
    },
    /// Print the batches (and with --records, the records) of a partition
    /// directory or of one `.log`, `.index` or `.timeindex` file.
    Dump {
        /// A partition directory or a segment file.
        path: PathBuf,
        /// Also print every record.
        #[arg(long)]
        records: bool,
        /// Print keys and values (as UTF-8, lossy) with --records.
        #[arg(long)]
        print_data: bool,
        /// Skip batches that end before this offset.
        #[arg(long, default_value_t = 0)]
        from_offset: u64,
        /// Stop after this many batches.
        #[arg(long)]
        max_batches: Option<u64>,
    },
    /// Check every batch (length, magic, CRC-32C, offsets, epochs) and both
    /// indexes of every segment, entry by entry.
    Verify {
        dir: PathBuf,
        /// `index.interval.bytes` the indexes were written with, to compare
        /// them with a rebuild.
        #[arg(long, default_value_t = 4096)]
        index_interval_bytes: u32,
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
        /// Allow cutting data below the recovery point.
        #[arg(long)]
        allow_truncation_below_recovery_point: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Segments { dir } => segments(&dir),
        Command::Dump {
            path,
            records,
            print_data,
            from_offset,
            max_batches,
        } => dump(&path, records, print_data, from_offset, max_batches),
        Command::Verify {
            dir,
            index_interval_bytes,
        } => verify(&dir, index_interval_bytes),
        Command::Recover {
            dir,
            recovery_point,
            clean,
            allow_truncation_below_recovery_point,
        } => recover(
            &dir,
            recovery_point,
            clean,
            allow_truncation_below_recovery_point,
        ),
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

fn require_dir(dir: &Path) -> Result<(), Error> {
    if !dir.is_dir() {
        return Err(Error::Io {
            path: dir.to_path_buf(),
            op: "open partition directory",
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    Ok(())
}

fn segments(dir: &Path) -> Result<bool, Error> {
    require_dir(dir)?;
    println!(
        "{:>20} {:>12} {:>10} {:>10}  file",
        "base offset", "bytes", "index", "timeindex"
    );
    for base in segment_bases(dir)? {
        let log = dir.join(highwater::storage::file_name(base, "log"));
        let len = |p: &Path| {
            fs::metadata(p)
                .map(|m| m.len().to_string())
                .unwrap_or_else(|_| "missing".into())
        };
        println!(
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
    println!(
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
                println!("{line}");
            }
            Err(e) => {
                println!("| {e}");
                break;
            }
        }
    }
}

fn dump(
    path: &Path,
    records: bool,
    print_data: bool,
    from: u64,
    max: Option<u64>,
) -> Result<bool, Error> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_owned();
    if path.is_dir() {
        let mut ok = true;
        let mut left = max.unwrap_or(u64::MAX);
        for base in segment_bases(path)? {
            println!(
                "Dumping {}",
                path.join(highwater::storage::file_name(base, "log"))
                    .display()
            );
            ok &= dump_log(path, base, records, print_data, from, &mut left)?;
        }
        return Ok(ok);
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((&name, ""));
    let base = highwater::storage::parse_base_offset(stem).ok_or_else(|| Error::BadFileName {
        path: path.to_path_buf(),
        reason: "a segment file is named by its base offset in 20 digits".into(),
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    println!("Dumping {}", path.display());
    match ext {
        "log" => dump_log(
            dir,
            base,
            records,
            print_data,
            from,
            &mut max.unwrap_or(u64::MAX),
        ),
        "index" => {
            let bytes = fs::read(path).map_err(|e| Error::io(path, "read", e))?;
            match OffsetIndex::parse(&bytes, base, usize::MAX / 8, u64::MAX, None) {
                Ok(i) => {
                    for e in i.entries() {
                        println!(
                            "offset: {} position: {}",
                            base + u64::from(e.relative_offset),
                            e.position
                        );
                    }
                    Ok(true)
                }
                Err(reason) => {
                    println!("invalid index: {reason}");
                    Ok(false)
                }
            }
        }
        "timeindex" => {
            let bytes = fs::read(path).map_err(|e| Error::io(path, "read", e))?;
            match TimeIndex::parse(&bytes, base, usize::MAX / 12, None) {
                Ok(t) => {
                    for e in t.entries() {
                        println!("timestamp: {} offset: {}", e.timestamp, e.offset);
                    }
                    Ok(true)
                }
                Err(reason) => {
                    println!("invalid time index: {reason}");
                    Ok(false)
                }
            }
        }
        _ => Err(Error::BadFileName {
            path: path.to_path_buf(),
            reason: "expected a .log, .index or .timeindex file, or a partition directory".into(),
        }),
    }
}

fn dump_log(
    dir: &Path,
    base: u64,
    records: bool,
    print_data: bool,
    from: u64,
    left: &mut u64,
) -> Result<bool, Error> {
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
        println!("{}: {p}", check.log_path.display());
        return Ok(false);
    }
    Ok(true)
}

fn verify(dir: &Path, index_interval_bytes: u32) -> Result<bool, Error> {
    require_dir(dir)?;
    let config = LogConfig {
        index_interval_bytes,
        ..LogConfig::default()
    };
    let mut ok = true;
    let mut expected_base: Option<u64> = None;
    for base in segment_bases(dir)? {
        let c = check_segment(dir, base, &config, None)?;
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
                } => {
                    line.push_str(&format!("; {what} valid ({entries} entries"));
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
        println!("{line}");
        expected_base = Some(c.next_offset);
    }
    println!(
        "{}",
        if ok {
            "verification passed"
        } else {
            "verification FAILED"
        }
    );
    Ok(ok)
}

/// The offset recorded for `dir` in the broker checkpoint `name` beside it.
fn checkpointed(dir: &Path, name: &str) -> Result<Option<u64>, Error> {
    let Some(dir_name) = dir.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let Ok(tp) = TopicPartition::parse_dir_name(dir_name) else {
        return Ok(None);
    };
    let Some(parent) = dir.parent() else {
        return Ok(None);
    };
    let cp = checkpoint::read_offsets(&parent.join(name))?;
    Ok(cp.and_then(|m| m.get(&tp).copied()))
}

fn recover(dir: &Path, rp: Option<u64>, clean: bool, allow: bool) -> Result<bool, Error> {
    require_dir(dir)?;
    let recovery_point = match rp {
        Some(rp) => rp,
        None => checkpointed(dir, "recovery-point-offset-checkpoint")?.unwrap_or(0),
    };
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
    println!(
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
        high_watermark: checkpointed(dir, "replication-offset-checkpoint")?.unwrap_or(0),
        log_start_offset: checkpointed(dir, "log-start-offset-checkpoint")?.unwrap_or(0),
    };
    match Log::open(&copy, config, params) {
        Ok((_, report)) => {
            // Paths in the report name the copy; show the original's.
            let text = report
                .to_string()
                .replace(&copy.display().to_string(), &dir.display().to_string());
            print!("{text}");
            let cuts = report.bytes_truncated > 0 || !report.segments_removed.is_empty();
            println!(
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
            println!(
                "{}",
                e.to_string()
                    .replace(&copy.display().to_string(), &dir.display().to_string())
            );
            println!("recovery WOULD REFUSE to open the log (pass --allow-truncation-below-recovery-point to see the cut)");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
