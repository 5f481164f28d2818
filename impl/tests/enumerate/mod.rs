//! Crash-state enumeration: every state a POSIX file system may leave when
//! a workload stops at any point, each one recovered and checked.
//!
//! A workload runs through the storage layer while its file-system seam
//! (`highwater::storage::fs`) records every change: creations, writes,
//! length changes, fsyncs, renames, deletions, directory syncs. A crash
//! after the first `k` operations (every `k`) leaves:
//! - every metadata operation among them (create, set length, rename,
//!   delete, mkdir), in order;
//! - every write followed, within the `k`, by an fsync of the same file;
//! - each other write (after its file's last fsync) kept, dropped, or torn
//!   at a sector boundary: only its first `j` sectors (512 bytes, aligned in
//!   the file) reach the disk; dropped bytes read as what was there before,
//!   zeros past the old end.
//!
//! Every combination is built as real files and recovered by a broker's
//! path (`LogDir::open`, `open_log`), then checked:
//! 1. recovery succeeds;
//! 2. nothing invalid is served: every offset from the log start to the
//!    log end reads back, CRC checked;
//! 3. the recovered log is a prefix of a state the workload passed through
//!    (from its log start offset), batches, epochs and records equal;
//! 4. no batch below the recovery point is lost: it ends no earlier than
//!    what the workload had flushed (and not since truncated) before the
//!    crash;
//! 5. indexes are consistent: every segment's `.index` and `.timeindex`
//!    are valid for its log, every offset is found by a lookup;
//! 6. the leader epoch cache is what the batches say (Kafka's `assign` of
//!    each batch);
//! 7. a second recovery is a no-op: nothing cut or removed, no file
//!    changed, the same log.
//!
//! Identical states reached by different combinations are recovered once.
//!
//! Each check is shown to fail in `crash_states.rs`: 1 and 2 by the old
//! truncation order, 3 and 4 by doctored expectations, 5-7 by a
//! [`Doctor`] that damages the files before or after the first recovery.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use highwater::storage::checkpoint::EpochEntry;
use highwater::storage::fs::{record, FsOp};
use highwater::storage::{
    check_segment, file_name, EpochCache, IndexCheck, Log, LogConfig, LogDir, Record,
    TopicPartition,
};

pub const SECTOR: u64 = 512;

/// A record as the checks compare it: offset, batch epoch, record.
pub type Entry = (u64, i32, Record);

/// The log a workload step left, as the API sees it.
#[derive(Debug, Clone)]
pub struct Logical {
    pub log_start: u64,
    pub entries: Vec<Entry>,
    /// Everything below it was flushed, and not truncated since.
    pub durable: u64,
}

/// One call of a workload: its name, where its operations end in the
/// record, and the log after it.
#[derive(Debug, Clone)]
pub struct Step {
    pub name: String,
    pub ops_end: usize,
    pub after: Logical,
}

/// A recorded workload.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub root: PathBuf,
    pub tp: TopicPartition,
    pub config: LogConfig,
    pub ops: Vec<FsOp>,
    pub steps: Vec<Step>,
}

/// Reads every record of a log, with its batch's epoch.
pub fn entries(log: &Log) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let data = log
            .read(at, 1 << 20, u64::MAX)
            .map_err(|e| format!("read at {at}: {e}"))?;
        if data.next_offset <= at {
            return Err(format!("read at {at} made no progress"));
        }
        for b in data.batches() {
            let recs = b
                .decode_records()
                .map_err(|e| format!("decode at {}: {e}", b.header.base_offset))?;
            for (o, r) in recs {
                if o >= at {
                    out.push((o, b.header.partition_leader_epoch, r));
                }
            }
        }
        at = data.next_offset;
    }
    Ok(out)
}

fn logical(log: &Log) -> Logical {
    Logical {
        log_start: log.log_start_offset(),
        entries: entries(log).expect("the live log reads"),
        durable: log.recovery_point(),
    }
}

/// Drives a workload, recording its file operations call by call.
pub struct Recorder {
    pub root: PathBuf,
    pub tp: TopicPartition,
    pub config: LogConfig,
    pub dir: Option<LogDir>,
    pub log: Option<Log>,
    ops: Vec<FsOp>,
    steps: Vec<Step>,
}

impl Recorder {
    /// Opens the log directory and the partition, recording that too.
    pub fn open(root: &Path, tp: TopicPartition, config: LogConfig) -> Recorder {
        let mut r = Recorder {
            root: root.to_path_buf(),
            tp,
            config,
            dir: None,
            log: None,
            ops: Vec::new(),
            steps: Vec::new(),
        };
        r.step("open", |r| {
            let dir = LogDir::open(&r.root).expect("open log dir");
            let (log, _) = dir.open_log(&r.tp, r.config.clone()).expect("open log");
            r.dir = Some(dir);
            r.log = Some(log);
        });
        r
    }

    /// Runs one call of the workload, recording its operations.
    pub fn step(&mut self, name: &str, f: impl FnOnce(&mut Recorder)) {
        let ((), ops) = record(|| f(self));
        self.ops.extend(ops);
        let after = logical(self.log.as_ref().expect("open"));
        self.steps.push(Step {
            name: name.to_string(),
            ops_end: self.ops.len(),
            after,
        });
    }

    pub fn log(&mut self) -> &mut Log {
        self.log.as_mut().expect("open")
    }

    /// Writes the broker checkpoints, as a broker does after a change.
    pub fn checkpoint(&mut self) {
        let (dir, log) = (
            self.dir.as_mut().expect("open"),
            self.log.as_ref().expect("open"),
        );
        dir.checkpoint([(&self.tp, log)]).expect("checkpoint");
    }

    pub fn finish(self) -> Recorded {
        let root = self.root.clone();
        let rel = |p: &Path| p.strip_prefix(&root).expect("under the root").to_path_buf();
        let ops = self
            .ops
            .into_iter()
            .map(|op| match op {
                FsOp::Create { path } => FsOp::Create { path: rel(&path) },
                FsOp::Write { path, offset, data } => FsOp::Write {
                    path: rel(&path),
                    offset,
                    data,
                },
                FsOp::SetLen { path, len } => FsOp::SetLen {
                    path: rel(&path),
                    len,
                },
                FsOp::Fsync { path } => FsOp::Fsync { path: rel(&path) },
                FsOp::Remove { path } => FsOp::Remove { path: rel(&path) },
                FsOp::Rename { from, to } => FsOp::Rename {
                    from: rel(&from),
                    to: rel(&to),
                },
                FsOp::SyncDir { path } => FsOp::SyncDir { path: rel(&path) },
                FsOp::CreateDir { path } => FsOp::CreateDir { path: rel(&path) },
            })
            .collect();
        Recorded {
            root,
            tp: self.tp,
            config: self.config,
            ops,
            steps: self.steps,
        }
    }
}

/// A file system image: directories and files with their contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Image {
    pub dirs: BTreeSet<PathBuf>,
    pub files: BTreeMap<PathBuf, Vec<u8>>,
}

/// How each write not yet synced lands: `0` kept, `1` dropped, `j + 1`
/// torn after its first `j` sectors.
fn pieces(offset: u64, len: usize) -> u64 {
    if len == 0 {
        return 1;
    }
    let end = offset + len as u64;
    (end - 1) / SECTOR - offset / SECTOR + 1
}

/// The writes among the first `k` operations that no later fsync (within
/// `k`) of the same file covers, with how many choices each has.
pub fn unsynced(ops: &[FsOp], k: usize) -> Vec<(usize, u64)> {
    // Files are tracked by inode: a rename moves one, a create makes one.
    let mut inode_of: BTreeMap<&Path, usize> = BTreeMap::new();
    let mut next = 0;
    let mut write_inode = Vec::new();
    let mut last_sync: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, op) in ops[..k].iter().enumerate() {
        match op {
            FsOp::Create { path } if !inode_of.contains_key(path.as_path()) => {
                inode_of.insert(path, next);
                next += 1;
            }
            FsOp::Write { path, offset, data } => {
                let ino = *inode_of.entry(path).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
                write_inode.push((i, ino, pieces(*offset, data.len())));
            }
            FsOp::Fsync { path } => {
                if let Some(&ino) = inode_of.get(path.as_path()) {
                    last_sync.insert(ino, i);
                }
            }
            FsOp::Rename { from, to } => {
                if let Some(ino) = inode_of.remove(from.as_path()) {
                    inode_of.insert(to, ino);
                }
            }
            FsOp::Remove { path } => {
                inode_of.remove(path.as_path());
            }
            _ => {}
        }
    }
    write_inode
        .into_iter()
        .filter(|&(i, ino, _)| last_sync.get(&ino).is_none_or(|&s| s < i))
        .map(|(i, _, p)| (i, p + 1))
        .collect()
}

/// The image the first `k` operations leave, with `choice[n]` for the
/// `n`th unsynced write (see [`unsynced`]).
pub fn build(ops: &[FsOp], k: usize, unsynced: &[(usize, u64)], choice: &[u64]) -> Image {
    let mut how: BTreeMap<usize, u64> = BTreeMap::new();
    for (n, &(i, _)) in unsynced.iter().enumerate() {
        how.insert(i, choice[n]);
    }
    let mut img = Image::default();
    for (i, op) in ops[..k].iter().enumerate() {
        match op {
            FsOp::CreateDir { path } => {
                img.dirs.insert(path.clone());
            }
            FsOp::Create { path } => {
                img.files.insert(path.clone(), Vec::new());
            }
            FsOp::Write { path, offset, data } => {
                let keep = match how.get(&i).copied().unwrap_or(0) {
                    0 => data.len(),
                    1 => 0,
                    j => (((offset / SECTOR + j - 1) * SECTOR).saturating_sub(*offset) as usize)
                        .min(data.len()),
                };
                if keep == 0 {
                    continue;
                }
                let f = img.files.entry(path.clone()).or_default();
                let end = *offset as usize + keep;
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[*offset as usize..end].copy_from_slice(&data[..keep]);
            }
            FsOp::SetLen { path, len } => {
                img.files
                    .entry(path.clone())
                    .or_default()
                    .resize(*len as usize, 0);
            }
            FsOp::Remove { path } => {
                img.files.remove(path);
            }
            FsOp::Rename { from, to } => {
                if let Some(c) = img.files.remove(from) {
                    img.files.insert(to.clone(), c);
                }
            }
            FsOp::Fsync { .. } | FsOp::SyncDir { .. } => {}
        }
    }
    img
}

/// Writes an image under `root`, which is emptied first.
pub fn materialize(img: &Image, root: &Path) {
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root).unwrap();
    for d in &img.dirs {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for (p, c) in &img.files {
        let path = root.join(p);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, c).unwrap();
    }
}

/// Every file under `dir` with its contents.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_file()) {
                out.insert(
                    e.file_name().to_string_lossy().into_owned(),
                    fs::read(e.path()).unwrap_or_default(),
                );
            }
        }
    }
    out
}

/// The epoch cache the batches of `entries` describe.
fn epochs_of(entries: &[Entry], log_start: u64) -> Vec<EpochEntry> {
    let mut c = EpochCache::new(Path::new("/nonexistent"), Vec::new());
    for (o, e, _) in entries {
        c.assign_in_memory(*e, *o);
    }
    c.truncate_from_start(log_start);
    c.entries().to_vec()
}

/// A deliberate fault, to show that checks 5-7 can fail: applied to every
/// crash state, it must be reported by its check (see `crash_states.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Doctor {
    /// No fault: the harness as CI runs it.
    #[default]
    None,
    /// Check 5: after the first recovery, the first entry of the first
    /// non-empty `.index` file on disk points one byte past the batch it
    /// names (still increasing and inside the log, so it parses).
    IndexEntry,
    /// Check 5 again, through recovery: before recovery, the first entry
    /// of every `.index` file with two or more entries is moved one byte.
    /// Of a segment below the recovery point, recovery validates the last
    /// index entry only (as Kafka's `OffsetIndex.sanityCheck` checks no
    /// entry but the last), so the bad entry stays in the loaded index; the
    /// lookups of check 5 land on it, fall back to a scan and note it.
    IndexEntryBeforeRecovery,
    /// Check 6: before recovery, the `leader-epoch-checkpoint` loses every
    /// entry after its first. Recovery checks that each entry names a
    /// batch where its epoch starts, not that no epoch is missing (Kafka's
    /// loader trusts the file outright), so where the later epochs'
    /// batches are below the recovery point the loss survives recovery.
    EpochEntry,
    /// Check 7: the first recovery leaves work for the second, a torn
    /// tail (7 bytes, less than a batch header) after the last segment's
    /// batches, which the second recovery cuts.
    TornTailAfterRecovery,
    /// Check 7 again, by its file comparison: the first recovery leaves a
    /// checkpoint's `.tmp` file (as an interrupted atomic write does),
    /// which the second recovery deletes.
    StrayFileAfterRecovery,
}

/// Keeps only the first entry of the image's `leader-epoch-checkpoint`.
fn drop_epoch_entries(part: &Path) {
    let path = part.join("leader-epoch-checkpoint");
    let Ok(Some(mut e)) = highwater::storage::checkpoint::read_epochs(&path) else {
        return;
    };
    e.truncate(1);
    highwater::storage::checkpoint::write_epochs(&path, &e).expect("rewrite the epoch checkpoint");
}

/// Moves the first entry of the `.index` file at `path` one byte past its
/// batch's start, if the file has at least `min` entries; says whether it
/// did.
fn move_first_index_entry(path: &Path, min: usize) -> bool {
    let mut b = fs::read(path).expect("read the index");
    if b.len() < 8 * min.max(1) {
        return false;
    }
    let pos = u32::from_be_bytes([b[4], b[5], b[6], b[7]]) + 1;
    b[4..8].copy_from_slice(&pos.to_be_bytes());
    fs::write(path, b).expect("write the index");
    true
}

/// Moves the first entry of the first non-empty `.index` file of `log`.
fn corrupt_index_entry(part: &Path, log: &Log) {
    for s in log.segments() {
        if move_first_index_entry(&part.join(file_name(s.base_offset, "index")), 1) {
            return;
        }
    }
}

/// Moves the first entry of every `.index` file of the image that has a
/// later entry (recovery checks the last one).
fn corrupt_index_entries_before_recovery(part: &Path) {
    for e in fs::read_dir(part).into_iter().flatten().flatten() {
        if e.path().extension().is_some_and(|x| x == "index") {
            move_first_index_entry(&e.path(), 2);
        }
    }
}

/// Appends a torn tail to the last segment of `log`.
fn append_torn_tail(part: &Path, log: &Log) {
    use std::io::Write;
    let last = log.segments().last().expect("a segment").base_offset;
    fs::OpenOptions::new()
        .append(true)
        .open(part.join(file_name(last, "log")))
        .and_then(|mut f| f.write_all(&[0xAB; 7]))
        .expect("append a torn tail");
}

/// Recovers the image at `root` and checks properties 1-7; `c` is the
/// workload step in progress at the crash.
pub fn check(w: &Recorded, c: usize, root: &Path, doctor: Doctor) -> Result<(), String> {
    let part = root.join(w.tp.dir_name());
    if doctor == Doctor::IndexEntryBeforeRecovery {
        corrupt_index_entries_before_recovery(&part);
    }
    if doctor == Doctor::EpochEntry {
        drop_epoch_entries(&part);
    }
    let open = || -> Result<(LogDir, Log, highwater::storage::RecoveryReport), String> {
        let dir = LogDir::open(root).map_err(|e| format!("log dir: {e}"))?;
        let (log, report) = dir
            .open_log(&w.tp, w.config.clone())
            .map_err(|e| format!("recovery failed: {e}"))?;
        Ok((dir, log, report))
    };
    let (_dir, log, report) = open()?;
    let got = entries(&log).map_err(|e| format!("invalid data served: {e}"))?;
    let (lso, leo) = (log.log_start_offset(), log.log_end_offset());
    if got.len() as u64 != leo - lso {
        return Err(format!("{} records in [{lso}, {leo})", got.len()));
    }
    // 3: a prefix of some state passed through.
    let matches = |s: &Logical| {
        lso >= s.log_start && {
            let from = s.entries.partition_point(|e| e.0 < lso);
            s.entries.len() >= from + got.len() && s.entries[from..from + got.len()] == got[..]
        }
    };
    let mut passed = vec![Logical {
        log_start: 0,
        entries: Vec::new(),
        durable: 0,
    }];
    passed.extend(w.steps[..=c].iter().map(|s| s.after.clone()));
    if !passed.iter().any(matches) {
        return Err(format!(
            "recovered log [{lso}, {leo}) is no prefix of a state the workload passed through\n{report}"
        ));
    }
    // 4: nothing flushed (and kept) is lost.
    let before = if c == 0 {
        0
    } else {
        w.steps[c - 1].after.durable
    };
    let durable = before.min(w.steps[c].after.durable);
    if leo < durable {
        return Err(format!(
            "log ends at {leo} but {durable} was flushed before the crash\n{report}"
        ));
    }
    let max_lso = passed.iter().map(|s| s.log_start).max().unwrap_or(0);
    if lso > max_lso {
        return Err(format!(
            "log start {lso} beyond any the workload set ({max_lso})"
        ));
    }
    // 5: indexes.
    // The loaded indexes first (every offset found by a lookup), then the
    // files on disk.
    let reader = log.reader();
    for (o, ..) in &got {
        let p = reader
            .lookup(*o)
            .map_err(|e| format!("lookup of {o}: {e}"))?;
        if !(p.batch_base_offset..=p.batch_last_offset).contains(o) {
            return Err(format!("lookup of {o} found {p:?}"));
        }
    }
    // A loaded entry naming the wrong batch is worked around by the reads
    // (a scan from the segment start), and noted: still a broken index.
    if let Some(note) = reader.index_notes().first() {
        return Err(format!("lookup of an offset fell back: {note}"));
    }
    if doctor == Doctor::IndexEntry {
        corrupt_index_entry(&part, &log);
    }
    for s in log.segments() {
        let chk = check_segment(&part, s.base_offset, &w.config, None)
            .map_err(|e| format!("check of segment {}: {e}", s.base_offset))?;
        if let Some(p) = chk.problem {
            return Err(format!("segment {} after recovery: {p}", s.base_offset));
        }
        for (what, ic) in [("index", chk.index), ("timeindex", chk.time_index)] {
            if !matches!(ic, IndexCheck::Valid { .. }) {
                return Err(format!("segment {}: {what} {ic:?}", s.base_offset));
            }
        }
    }
    // 6: the epoch cache.
    if log.epoch_entries() != epochs_of(&got, lso).as_slice() {
        return Err(format!(
            "epoch cache {:?} but the batches say {:?}",
            log.epoch_entries(),
            epochs_of(&got, lso)
        ));
    }
    // 7: a second recovery changes nothing.
    if doctor == Doctor::TornTailAfterRecovery {
        append_torn_tail(&part, &log);
    }
    if doctor == Doctor::StrayFileAfterRecovery {
        fs::write(part.join("leader-epoch-checkpoint.tmp"), b"0\n0\n").expect("write a stray file");
    }
    let files = snapshot(&part);
    drop(log);
    drop(_dir);
    let (_d2, log2, report2) = open().map_err(|e| format!("the second recovery: {e}"))?;
    if report2.problem.is_some()
        || report2.bytes_truncated > 0
        || !report2.segments_removed.is_empty()
    {
        return Err(format!("the second recovery cut data:\n{report2}"));
    }
    let got2 = entries(&log2).map_err(|e| format!("second recovery serves: {e}"))?;
    drop(log2);
    if got2 != got || snapshot(&part) != files {
        return Err("the second recovery changed the log".into());
    }
    Ok(())
}

/// What an enumeration found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Crash states enumerated (every prefix, every combination).
    pub states: u64,
    /// Distinct file-system images among them, each recovered and checked.
    pub recovered: u64,
    /// Recovered states that failed a check (the first few are described
    /// in `failures`).
    pub failed: u64,
    pub failures: Vec<String>,
    pub elapsed: Duration,
}

/// The workload step in progress after `k` operations.
fn step_at(w: &Recorded, k: usize) -> usize {
    w.steps
        .iter()
        .position(|s| s.ops_end >= k)
        .unwrap_or(w.steps.len() - 1)
}

/// Enumerates every crash state of `w` (or, with `limit`, stops after that
/// many states) on `threads` threads, scratch files under `scratch`.
pub fn enumerate(w: &Recorded, scratch: &Path, threads: usize, limit: Option<u64>) -> Outcome {
    enumerate_doctored(w, scratch, threads, limit, Doctor::None)
}

/// [`enumerate`], with `doctor` applied to every state.
pub fn enumerate_doctored(
    w: &Recorded,
    scratch: &Path,
    threads: usize,
    limit: Option<u64>,
    doctor: Doctor,
) -> Outcome {
    let start = Instant::now();
    let prefixes: Vec<usize> = (0..=w.ops.len()).collect();
    let seen = std::sync::Mutex::new(HashSet::new());
    let budget = std::sync::atomic::AtomicU64::new(limit.unwrap_or(u64::MAX));
    let results = std::sync::Mutex::new(Outcome::default());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (prefixes, seen, results, budget) = (&prefixes, &seen, &results, &budget);
            s.spawn(move || {
                let root = scratch.join(format!("worker-{t}"));
                let mut out = Outcome::default();
                for &k in prefixes.iter().skip(t).step_by(threads) {
                    let u = unsynced(&w.ops, k);
                    let c = step_at(w, k);
                    let mut choice = vec![0u64; u.len()];
                    loop {
                        if budget
                            .fetch_update(
                                std::sync::atomic::Ordering::SeqCst,
                                std::sync::atomic::Ordering::SeqCst,
                                |b| b.checked_sub(1),
                            )
                            .is_err()
                        {
                            break;
                        }
                        out.states += 1;
                        let img = build(&w.ops, k, &u, &choice);
                        let mut h = DefaultHasher::new();
                        (c, &img).hash(&mut h);
                        if seen.lock().unwrap().insert(h.finish()) {
                            out.recovered += 1;
                            materialize(&img, &root);
                            if let Err(e) = check(w, c, &root, doctor) {
                                out.failed += 1;
                                if out.failures.len() < 5 {
                                    out.failures.push(format!(
                                        "after {k} operations (in step {c}, {}), choices {choice:?}: {e}",
                                        w.steps[c].name
                                    ));
                                }
                            }
                        }
                        // Next combination (odometer).
                        let mut n = 0;
                        while n < u.len() {
                            choice[n] += 1;
                            if choice[n] < u[n].1 {
                                break;
                            }
                            choice[n] = 0;
                            n += 1;
                        }
                        if n == u.len() {
                            break;
                        }
                    }
                }
                let _ = fs::remove_dir_all(&root);
                let mut r = results.lock().unwrap();
                r.states += out.states;
                r.recovered += out.recovered;
                r.failed += out.failed;
                r.failures.extend(out.failures);
            });
        }
    });
    let mut r = results.into_inner().unwrap();
    r.elapsed = start.elapsed();
    r
}

/// How many crash states `w` has in all.
pub fn count_states(w: &Recorded) -> u64 {
    (0..=w.ops.len())
        .map(|k| unsynced(&w.ops, k).iter().map(|&(_, n)| n).product::<u64>())
        .sum()
}

/// A scratch directory on tmpfs when there is one.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().unwrap()
}

/// Records for batch `i` of a crash workload: small, so a few share a
/// sector and others straddle one.
pub fn batch(i: u64) -> Vec<Record> {
    (0..1 + i % 3)
        .map(|j| {
            let mut r = Record::new(
                1_000 + i as i64 * 10 + j as i64,
                format!("v{i}.{j}-{}", "z".repeat((i * 37 % 150) as usize)),
            );
            r.key = Some(format!("k{i}").into_bytes());
            r
        })
        .collect()
}
