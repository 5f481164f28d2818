//! How a state is held, apart from what it means. The model's rules
//! (`actions`, `controller`, `truncation`, `properties`) are written once,
//! generic over a [`Shape`], and run at any size:
//!
//! - [`Compact`] is the checker's: bytes for offsets, epochs and record ids,
//!   fixed arrays for logs, records and requests, so that a state is `Copy`,
//!   hashes in one pass, and tens of millions of them fit in memory. The
//!   checker's bounds (records, epochs, crashes, leader moves) apply.
//! - [`Unbounded`] is trace validation's: 32-bit numbers and growable
//!   tables, so a real run is followed at its own size (any number of
//!   records, epochs and faults). No bound applies: the bounds belong to the
//!   checker's configuration, not to the rules.
//!
//! Both hold the same fields; `model/tests/shapes.rs` runs the rules in both
//! side by side and asks that they agree wherever the compact one can follow.

use std::collections::BTreeSet;
use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::ops::{Add, AddAssign, Sub};
use std::sync::Arc;

use crate::state::{CompactLog, Entry, RecordHistory, Request, EPOCH_SLOTS, MAX_RECORDS};

/// An offset, epoch, record id or count.
pub trait Num:
    Copy
    + Default
    + Debug
    + Display
    + Eq
    + Ord
    + Hash
    + Send
    + Sync
    + 'static
    + From<u8>
    + Add<Output = Self>
    + Sub<Output = Self>
    + AddAssign
{
    const ZERO: Self;
    const ONE: Self;
    /// As an index into a log or table.
    fn idx(self) -> usize;
    /// From an index (a position in a log). The compact shape never holds
    /// more than its bounds, so the index fits.
    fn at(index: usize) -> Self;
    /// From an index, if it fits.
    fn try_at(index: usize) -> Option<Self>;
    fn saturating_succ(self) -> Self;
}

macro_rules! num {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            fn idx(self) -> usize {
                self as usize
            }
            fn at(index: usize) -> Self {
                index as $t
            }
            fn try_at(index: usize) -> Option<Self> {
                <$t>::try_from(index).ok()
            }
            fn saturating_succ(self) -> Self {
                self.saturating_add(1)
            }
        }
    };
}
num!(u8);
num!(u32);

/// A replica's log: entries by offset, from offset 0. It hands out no
/// slice, so that the unbounded log can hold its entries in shared chunks
/// ([`Chunked`]).
pub trait LogStore<S: Shape>:
    Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static
{
    /// The number of entries (the log end offset as an index).
    fn len(&self) -> usize;
    fn get(&self, offset: S::Offset) -> Option<Entry<S>>;
    /// The entries from offset `from` on, in order.
    fn iter_from(&self, from: usize) -> impl Iterator<Item = Entry<S>> + '_;
    fn append(&mut self, entry: Entry<S>);
    /// Cuts the log back to `offset` (nothing when it is already shorter).
    fn truncate(&mut self, offset: S::Offset);
    /// A log of these entries, if the shape can hold them.
    fn from_entries(entries: Vec<Entry<S>>) -> Option<Self>;

    /// Entries per run the log summarises ([`LogStore::ids_in_run`]); a
    /// log that keeps no summaries has one run.
    const RUN: usize = usize::MAX;
    /// The least and greatest record id held at the offsets of run `run`
    /// (`run * RUN` on), where the log keeps them.
    fn ids_in_run(&self, _run: usize) -> Option<(u64, u64)> {
        None
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The entries, in order.
    fn iter(&self) -> impl Iterator<Item = Entry<S>> + '_ {
        self.iter_from(0)
    }
    /// The log end offset.
    fn leo(&self) -> S::Offset {
        S::Offset::at(self.len())
    }
    fn last(&self) -> Option<Entry<S>> {
        self.len()
            .checked_sub(1)
            .and_then(|i| self.get(S::Offset::at(i)))
    }
    /// How many entries from offset 0 on both logs hold alike.
    fn common_prefix(&self, other: &Self) -> usize {
        self.iter()
            .zip(other.iter())
            .take_while(|(a, b)| a == b)
            .count()
    }
    /// Whether both logs hold the same entries below `offset`.
    fn agrees_below(&self, other: &Self, offset: S::Offset) -> bool {
        let n = offset.idx();
        self.len() >= n && other.len() >= n && self.iter().take(n).eq(other.iter().take(n))
    }
    /// Whether both logs reach `offset` and hold the same entries from
    /// `from` up to it (what [`LogStore::agrees_below`] still has to read
    /// where the entries below `from` are known to agree).
    fn agrees_from(&self, other: &Self, from: usize, offset: S::Offset) -> bool {
        let n = offset.idx();
        self.len() >= n
            && other.len() >= n
            && (from >= n
                || self
                    .iter_from(from)
                    .take(n - from)
                    .eq(other.iter_from(from).take(n - from)))
    }
    /// Where each run of one epoch begins, in order: (epoch, first offset).
    /// Enough to build a leader epoch cache (`truncation::cache_of`), whose
    /// `assign` ignores every entry of a run but its first. Read from the
    /// entries; the unbounded log keeps them as it grows, so that a cache
    /// costs the log's epochs and not its length.
    fn epoch_starts(&self) -> impl Iterator<Item = (S::Epoch, S::Offset)> + '_ {
        let mut previous = None;
        self.iter().enumerate().filter_map(move |(i, e)| {
            let starts = previous != Some(e.epoch);
            previous = Some(e.epoch);
            starts.then(|| (e.epoch, S::Offset::at(i)))
        })
    }
}

/// Values by index (records by id, requests by epoch); a slot past the end
/// reads as the default.
pub trait Table<T>: Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static {
    fn as_slice(&self) -> &[T];
    /// The slot at `index`, made if the table can grow (the compact one
    /// cannot: its bounds keep every index within it).
    fn slot(&mut self, index: usize) -> &mut T;
    /// A table of these values, if the shape can hold them.
    fn from_vec(items: Vec<T>) -> Option<Self>;
}

impl<T, const N: usize> Table<T> for [T; N]
where
    T: Clone + Debug + Eq + Ord + Hash + Send + Sync + 'static,
    [T; N]: Default,
{
    fn as_slice(&self) -> &[T] {
        self
    }
    fn slot(&mut self, index: usize) -> &mut T {
        &mut self[index]
    }
    fn from_vec(items: Vec<T>) -> Option<Self> {
        let mut table = Self::default();
        if items.len() > N {
            return None;
        }
        for (slot, item) in table.iter_mut().zip(items) {
            *slot = item;
        }
        Some(table)
    }
}

impl<T> Table<T> for UnboundedTable<T>
where
    T: Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static,
{
    fn as_slice(&self) -> &[T] {
        &self.0
    }
    fn slot(&mut self, index: usize) -> &mut T {
        let items = Arc::make_mut(&mut self.0);
        if index >= items.len() {
            items.resize_with(index + 1, T::default);
        }
        &mut items[index]
    }
    fn from_vec(items: Vec<T>) -> Option<Self> {
        Some(UnboundedTable(Arc::new(items)))
    }
}

/// Records' histories by id: a [`Table`] that hands out no slice, so that
/// the unbounded one can hold its items in shared chunks
/// ([`UnboundedRecords`]).
pub trait RecordTable<T: 'static>:
    Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static
{
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn get(&self, index: usize) -> Option<&T>;
    /// The items, in order.
    fn iter(&self) -> impl Iterator<Item = &T> + '_;
    /// The slot at `index`, made if the table can grow.
    fn slot(&mut self, index: usize) -> &mut T;
    /// Whether the table can tell, without reading them one by one, that
    /// every item with an index in `indexes` has a key ([`Spanned`]) of at
    /// most `most`; false where it cannot.
    fn keys_at_most(&self, _indexes: std::ops::RangeInclusive<usize>, _most: u64) -> bool {
        false
    }
    /// A table of these values, if the shape can hold them.
    fn from_vec(items: Vec<T>) -> Option<Self>;
    /// The indexes below `len` whose items differ from `other`'s.
    fn changed_since(&self, other: &Self, len: usize) -> Vec<usize>
    where
        T: PartialEq,
    {
        (0..len).filter(|&i| self.get(i) != other.get(i)).collect()
    }
}

impl<T, const N: usize> RecordTable<T> for [T; N]
where
    T: Clone + Debug + Eq + Ord + Hash + Send + Sync + 'static,
    [T; N]: Default,
{
    fn len(&self) -> usize {
        N
    }
    fn get(&self, index: usize) -> Option<&T> {
        self.as_slice().get(index)
    }
    fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.as_slice().iter()
    }
    fn slot(&mut self, index: usize) -> &mut T {
        &mut self[index]
    }
    fn from_vec(items: Vec<T>) -> Option<Self> {
        <Self as Table<T>>::from_vec(items)
    }
}

/// Items in a chunk of a [`Chunked`] table.
const CHUNK: usize = 64;

/// A table of any length held in chunks of [`CHUNK`] items, each shared
/// between the states of a search until one of them changes it: a step
/// that marks one record or appends one entry copies one chunk and the list
/// of chunks, not the table (a table of 20,000 records was copied whole at
/// every Produce a search tried), and equal tables that share their chunks
/// compare without reading them.
#[derive(Clone)]
pub struct Chunked<T> {
    chunks: Arc<Vec<Arc<Chunk<T>>>>,
    len: usize,
}

/// One chunk of a [`Chunked`] table: its items, and the least and
/// greatest of their keys ([`Spanned`]), worked out when first asked and
/// forgotten whenever the items are written (every write goes through
/// `DerefMut`), so that a reader can pass over a chunk whole.
pub struct Chunk<T> {
    items: Vec<T>,
    span: std::sync::OnceLock<(u64, u64)>,
}

impl<T> From<Vec<T>> for Chunk<T> {
    fn from(items: Vec<T>) -> Self {
        Chunk {
            items,
            span: std::sync::OnceLock::new(),
        }
    }
}

/// A copy starts with no span: it is about to be written. It has room for
/// a whole chunk: the last chunk of a log is copied to be appended to, and
/// growing each copy was a twentieth of trace validation's time.
impl<T: Clone> Clone for Chunk<T> {
    fn clone(&self) -> Self {
        let mut items = Vec::with_capacity(CHUNK.max(self.items.len()));
        items.extend_from_slice(&self.items);
        Chunk::from(items)
    }
}

impl<T: PartialEq> PartialEq for Chunk<T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T> std::ops::Deref for Chunk<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.items
    }
}

impl<T> std::ops::DerefMut for Chunk<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        if !STALE_SPANS.with(std::cell::Cell::get) {
            self.span.take();
        }
        &mut self.items
    }
}

thread_local! {
    static STALE_SPANS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Deliberately broken, for the tests that show they catch it: chunks
/// written on this thread keep the span they had (model/tests/unbounded_log.rs).
#[doc(hidden)]
pub fn keep_stale_spans(on: bool) {
    STALE_SPANS.with(|c| c.set(on));
}

impl<T: Spanned> Chunk<T> {
    /// The least and greatest key of the items ((u64::MAX, 0) for none).
    fn span(&self) -> (u64, u64) {
        *self.span.get_or_init(|| {
            self.items.iter().fold((u64::MAX, 0), |(lo, hi), item| {
                let k = item.key();
                (lo.min(k), hi.max(k))
            })
        })
    }
}

/// What a chunk summarises of its items: a log entry's record id; a
/// record's visible epoch (`u64::MAX` while it is not visible).
pub trait Spanned {
    fn key(&self) -> u64;
}

impl Spanned for Entry<Unbounded> {
    fn key(&self) -> u64 {
        self.id as u64
    }
}

impl Spanned for RecordHistory<Unbounded> {
    fn key(&self) -> u64 {
        self.visible.map_or(u64::MAX, u64::from)
    }
}

/// The records' histories in the unbounded shape.
pub type UnboundedRecords<T> = Chunked<T>;

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Arc::default(),
            len: 0,
        }
    }
}

impl<T: PartialEq> PartialEq for Chunked<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && (Arc::ptr_eq(&self.chunks, &other.chunks)
                || self
                    .chunks
                    .iter()
                    .zip(other.chunks.iter())
                    .all(|(a, b)| Arc::ptr_eq(a, b) || a == b))
    }
}

impl<T: Eq> Eq for Chunked<T> {}

impl<T: Ord> PartialOrd for Chunked<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<T: Ord> Ord for Chunked<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.items_from(0).cmp(other.items_from(0))
    }
}

impl<T: Debug> Debug for Chunked<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.items_from(0)).finish()
    }
}

/// Hashed as [`hash_tail`] hashes a slice: the length and the last few.
impl<T: Hash> Hash for Chunked<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.len.hash(h);
        let from = self.len.saturating_sub(HASHED_TAIL);
        (self.len - from).hash(h);
        for item in self.items_from(from) {
            item.hash(h);
        }
    }
}

impl<T> Chunked<T> {
    #[inline]
    fn item(&self, index: usize) -> Option<&T> {
        (index < self.len).then(|| &self.chunks[index / CHUNK][index % CHUNK])
    }
    /// The items from `from` on, in order.
    fn items_from(&self, from: usize) -> impl Iterator<Item = &T> + '_ {
        let first = from.min(self.len);
        self.chunks[first / CHUNK..]
            .iter()
            .flat_map(|c| c.iter())
            .skip(first % CHUNK)
    }
}

impl<T: Clone> Chunked<T> {
    fn push(&mut self, item: T) {
        let chunks = Arc::make_mut(&mut self.chunks);
        match chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(item),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(item);
                chunks.push(Arc::new(Chunk::from(chunk)));
            }
        }
        self.len += 1;
    }
    /// Keeps the first `len` items.
    fn truncate(&mut self, len: usize) {
        if len >= self.len {
            return;
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        chunks.truncate(len.div_ceil(CHUNK));
        if !len.is_multiple_of(CHUNK) {
            if let Some(last) = chunks.last_mut() {
                Arc::make_mut(last).truncate(len % CHUNK);
            }
        }
        self.len = len;
    }
}

impl<T: PartialEq> Chunked<T> {
    /// How many items from the first on both hold alike: shared chunks are
    /// passed without reading them.
    fn common_prefix(&self, other: &Self) -> usize {
        if Arc::ptr_eq(&self.chunks, &other.chunks) {
            return self.len.min(other.len);
        }
        let mut same = 0;
        for (a, b) in self.chunks.iter().zip(other.chunks.iter()) {
            if Arc::ptr_eq(a, b) {
                same += a.len();
                continue;
            }
            let alike = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
            same += alike;
            if alike < CHUNK {
                break;
            }
        }
        same.min(self.len).min(other.len)
    }
}

impl<T> RecordTable<T> for Chunked<T>
where
    T: Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + Spanned + 'static,
{
    /// By the chunks' spans: the chunks that hold `indexes`, all held.
    fn keys_at_most(&self, indexes: std::ops::RangeInclusive<usize>, most: u64) -> bool {
        let (first, last) = (*indexes.start(), *indexes.end());
        first <= last
            && last < self.len
            && self.chunks[first / CHUNK..=last / CHUNK]
                .iter()
                .all(|c| c.span().1 <= most)
    }
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize) -> Option<&T> {
        self.item(index)
    }
    fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.items_from(0)
    }
    fn slot(&mut self, index: usize) -> &mut T {
        while self.len <= index {
            self.push(T::default());
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        &mut Arc::make_mut(&mut chunks[index / CHUNK])[index % CHUNK]
    }
    /// Reads only the chunks the two do not share.
    fn changed_since(&self, other: &Self, len: usize) -> Vec<usize> {
        let mut changed = Vec::new();
        for (c, chunk) in self.chunks.iter().enumerate() {
            let first = c * CHUNK;
            if first >= len {
                break;
            }
            let theirs = other.chunks.get(c);
            if theirs.is_some_and(|t| Arc::ptr_eq(t, chunk)) {
                continue;
            }
            for (i, item) in chunk.iter().enumerate().take(len - first) {
                if theirs.and_then(|t| t.get(i)) != Some(item) {
                    changed.push(first + i);
                }
            }
        }
        changed
    }
    fn from_vec(items: Vec<T>) -> Option<Self> {
        let len = items.len();
        let chunks = items
            .chunks(CHUNK)
            .map(|c| Arc::new(Chunk::from(c.to_vec())))
            .collect();
        Some(Chunked {
            chunks: Arc::new(chunks),
            len,
        })
    }
}

/// A set of record ids (the acks=all produce requests a leader holds).
pub trait IdSet<Id>: Clone + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static {
    fn insert(&mut self, id: Id);
    fn remove(&mut self, id: Id);
    fn contains(&self, id: Id) -> bool;
    fn is_empty(&self) -> bool;
    /// The ids, in order.
    fn ids(&self) -> Vec<Id> {
        self.iter_ids().collect()
    }
    /// The ids, in order, without collecting them.
    fn iter_ids(&self) -> impl Iterator<Item = Id> + '_;
}

/// Record ids below 8 as a bit mask: the compact shape holds at most
/// [`MAX_RECORDS`] records.
impl IdSet<u8> for u8 {
    fn insert(&mut self, id: u8) {
        *self |= 1 << id;
    }
    fn remove(&mut self, id: u8) {
        *self &= !(1 << id);
    }
    fn contains(&self, id: u8) -> bool {
        *self & (1 << id) != 0
    }
    fn is_empty(&self) -> bool {
        *self == 0
    }
    fn iter_ids(&self) -> impl Iterator<Item = u8> + '_ {
        (0..8).filter(|&id| IdSet::contains(self, id))
    }
}

impl IdSet<u32> for BTreeSet<u32> {
    fn insert(&mut self, id: u32) {
        BTreeSet::insert(self, id);
    }
    fn remove(&mut self, id: u32) {
        BTreeSet::remove(self, &id);
    }
    fn contains(&self, id: u32) -> bool {
        BTreeSet::contains(self, &id)
    }
    fn is_empty(&self) -> bool {
        BTreeSet::is_empty(self)
    }
    fn iter_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().copied()
    }
}

/// How a state is held. See the module's documentation.
pub trait Shape: Copy + Default + Debug + Eq + Ord + Hash + Send + Sync + 'static + Sized {
    type Offset: Num;
    type Epoch: Num;
    type RecordId: Num;
    /// Crashes and leader moves so far.
    type Count: Num;
    type Log: LogStore<Self>;
    type Records: RecordTable<RecordHistory<Self>>;
    /// LeaderAndIsr requests by epoch.
    type Requests: Table<Option<Request>>;
    type Pending: IdSet<Self::RecordId>;
    /// Whether the checker's budgets (records, epochs, crashes, leader
    /// moves) bound what may happen.
    const BOUNDED: bool;
}

/// The checker's shape. See the module's documentation.
/// Serializable, so that states can be sent between the distributed
/// checker's processes.
#[derive(
    Clone,
    Copy,
    Default,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Compact;

impl Shape for Compact {
    type Offset = u8;
    type Epoch = u8;
    type RecordId = u8;
    type Count = u8;
    type Log = CompactLog;
    type Records = [RecordHistory<Compact>; MAX_RECORDS];
    type Requests = [Option<Request>; EPOCH_SLOTS];
    type Pending = u8;
    const BOUNDED: bool = true;
}

/// Trace validation's shape. See the module's documentation.
#[derive(
    Clone,
    Copy,
    Default,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Unbounded;

impl Shape for Unbounded {
    type Offset = u32;
    type Epoch = u32;
    type RecordId = u32;
    type Count = u32;
    type Log = UnboundedLog;
    type Records = UnboundedRecords<RecordHistory<Unbounded>>;
    type Requests = UnboundedTable<Option<Request>>;
    type Pending = BTreeSet<u32>;
    const BOUNDED: bool = false;
}

/// A log of any length, in shared chunks ([`Chunked`]): a search step
/// changes one log at most, and copying every log of every state it visits
/// made validation quadratic in the run's length; comparing two states
/// whose logs share their chunks reads only the chunks that differ. It
/// keeps where each epoch's run begins ([`LogStore::epoch_starts`]): a few
/// per leader election, however long the log, where rebuilding an epoch
/// cache from the entries at every fetch a search tries was an eighth of
/// validation's time.
#[derive(Clone, Default)]
pub struct UnboundedLog {
    entries: Chunked<Entry<Unbounded>>,
    /// (epoch, first offset) of each run of one epoch, in order.
    starts: Arc<Vec<(u32, u32)>>,
}

/// Equal, ordered and hashed by its entries alone: the runs are read from
/// them.
impl PartialEq for UnboundedLog {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
    }
}

impl Eq for UnboundedLog {}

impl PartialOrd for UnboundedLog {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for UnboundedLog {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.entries.cmp(&other.entries)
    }
}

impl Hash for UnboundedLog {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.entries.hash(h)
    }
}

impl Debug for UnboundedLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.entries.fmt(f)
    }
}

impl LogStore<Unbounded> for UnboundedLog {
    const RUN: usize = CHUNK;
    fn ids_in_run(&self, run: usize) -> Option<(u64, u64)> {
        self.entries.chunks.get(run).map(|c| c.span())
    }
    fn len(&self) -> usize {
        self.entries.len
    }
    #[inline]
    fn get(&self, offset: u32) -> Option<Entry<Unbounded>> {
        self.entries.item(offset as usize).copied()
    }
    fn iter_from(&self, from: usize) -> impl Iterator<Item = Entry<Unbounded>> + '_ {
        self.entries.items_from(from).copied()
    }
    fn append(&mut self, entry: Entry<Unbounded>) {
        if self.last().is_none_or(|last| last.epoch != entry.epoch) {
            let start = self.entries.len as u32;
            Arc::make_mut(&mut self.starts).push((entry.epoch, start));
        }
        self.entries.push(entry);
    }
    fn truncate(&mut self, offset: u32) {
        if (offset as usize) < self.entries.len {
            self.entries.truncate(offset as usize);
            let starts = Arc::make_mut(&mut self.starts);
            while starts.last().is_some_and(|&(_, start)| start >= offset) {
                starts.pop();
            }
        }
    }
    fn from_entries(entries: Vec<Entry<Unbounded>>) -> Option<Self> {
        let mut log = UnboundedLog::default();
        for e in entries {
            log.append(e);
        }
        Some(log)
    }
    fn common_prefix(&self, other: &Self) -> usize {
        self.entries.common_prefix(&other.entries)
    }
    fn agrees_below(&self, other: &Self, offset: u32) -> bool {
        let n = offset as usize;
        self.len() >= n && other.len() >= n && self.common_prefix(other) >= n
    }
    fn epoch_starts(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.starts.iter().copied()
    }
}

/// Entries at the end of a log or table that its hash reads.
const HASHED_TAIL: usize = 4;

/// The length and the last few items: what changes between the states one
/// event's search visits (appends, truncations, the newest records), so
/// unequal states seldom collide, while hashing costs the same however long
/// the run (hashing every entry made validation quadratic in the run's
/// length). Equality still compares everything.
fn hash_tail<T: Hash, H: std::hash::Hasher>(items: &[T], h: &mut H) {
    items.len().hash(h);
    items[items.len().saturating_sub(HASHED_TAIL)..].hash(h);
}

/// A table of any length (records by id, requests by epoch), shared and
/// hashed as a log is.
#[derive(Clone, Default, Eq, PartialOrd, Ord)]
pub struct UnboundedTable<T>(Arc<Vec<T>>);

impl<T: PartialEq> PartialEq for UnboundedTable<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl<T: Debug> Debug for UnboundedTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl<T: Hash> Hash for UnboundedTable<T> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        hash_tail(&self.0, h)
    }
}

/// Whether `count` of something is still below the checker's `budget` for
/// it; always, in a shape without bounds.
pub fn within<S: Shape, N: Num>(count: N, budget: u8) -> bool {
    !S::BOUNDED || count < N::from(budget)
}

/// Whether leader epoch `epoch` is within the checker's `max_epoch`;
/// always, in a shape without bounds.
pub fn epoch_within<S: Shape>(epoch: S::Epoch, max_epoch: u8) -> bool {
    !S::BOUNDED || epoch <= S::Epoch::from(max_epoch)
}
