//! The state of one partition: replicas, the controller's quorum state, the
//! LeaderAndIsr requests it sent, and the history that properties speak about.
//!
//! Every type is generic over a [`Shape`]: the checker's [`Compact`] one is
//! fixed-size (no heap) so that states clone and hash cheaply (it visits
//! tens of millions of them); trace validation's [`Unbounded`] one holds a
//! real run at its own size. The names without a shape (`State`, `Replica`,
//! `Offset`, ...) are the compact ones.

use serde::{Deserialize, Serialize};
use std::mem::MaybeUninit;

pub use crate::shape::{Compact, IdSet, LogStore, Num, RecordTable, Shape, Table, Unbounded};

/// Largest replica count a model may have.
pub const MAX_REPLICAS: usize = 5;
/// Largest number of records a producer may write in one run.
pub const MAX_RECORDS: usize = 4;
/// Largest leader epoch a run may assign (epochs start at 0, as in Kafka).
pub const MAX_EPOCH: u8 = 4;
/// Leader epochs the progress check may use beyond a run's bound, so that a
/// partition whose last epoch is spent can still be shown to heal: removing
/// a dead leader takes one, electing the next another.
pub const RECOVERY_EPOCHS: u8 = 2;
/// One request slot per leader epoch, the recovery epochs included.
pub const EPOCH_SLOTS: usize = (MAX_EPOCH + RECOVERY_EPOCHS) as usize + 1;

pub type ReplicaId = u8;
pub type Epoch = u8;
pub type Offset = u8;
pub type RecordId = u8;

/// A set of replica ids, as a bit mask.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReplicaSet(pub u8);

impl ReplicaSet {
    pub const EMPTY: ReplicaSet = ReplicaSet(0);

    pub fn all(n: u8) -> Self {
        ReplicaSet(((1u16 << n) - 1) as u8)
    }
    pub fn single(r: ReplicaId) -> Self {
        ReplicaSet(1 << r)
    }
    pub fn contains(self, r: ReplicaId) -> bool {
        self.0 & (1 << r) != 0
    }
    pub fn with(self, r: ReplicaId) -> Self {
        ReplicaSet(self.0 | (1 << r))
    }
    pub fn intersection(self, other: ReplicaSet) -> Self {
        ReplicaSet(self.0 & other.0)
    }
    pub fn without(self, r: ReplicaId) -> Self {
        ReplicaSet(self.0 & !(1 << r))
    }
    pub fn len(self) -> u8 {
        self.0.count_ones() as u8
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = ReplicaId> {
        (0..8u8).filter(move |r| self.contains(*r))
    }
    /// Renames every member through `map` (old id -> new id).
    #[inline]
    pub fn renamed(self, map: &[ReplicaId; MAX_REPLICAS]) -> Self {
        // Without branches: the search renames sets of every state it
        // meets, and which members a set has is not predictable.
        let mut out = 0u8;
        for (r, &to) in map.iter().enumerate() {
            out |= ((self.0 >> r) & 1) << to;
        }
        ReplicaSet(out)
    }
}

impl std::fmt::Debug for ReplicaSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{")?;
        for (i, r) in self.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{}", replica_name(r))?;
        }
        write!(f, "}}")
    }
}

/// Replicas are shown as letters: A, B, C, ...
pub fn replica_name(r: ReplicaId) -> char {
    (b'A' + r) as char
}

/// Records are shown as lower-case letters: a, b, c, ...
pub fn record_name(id: RecordId) -> char {
    (b'a' + id) as char
}

/// A record's name in any shape: its letter while there are letters, else
/// `#` and its id.
pub struct RecordName<Id>(pub Id);

impl<Id: Num> std::fmt::Display for RecordName<Id> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.idx() {
            i if i < 26 => write!(f, "{}", (b'a' + i as u8) as char),
            i => write!(f, "#{i}"),
        }
    }
}

/// One log entry: which record, written by the leader of which epoch.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Entry<S: Shape = Compact> {
    pub id: S::RecordId,
    pub epoch: S::Epoch,
}

impl<S: Shape> std::fmt::Debug for Entry<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", RecordName(self.id), self.epoch)
    }
}

/// The compact shape's log.
pub type Log = CompactLog;

/// A replica's log in the compact shape. Each record id is appended once,
/// at one offset, so a log never holds more entries than there are records.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CompactLog {
    len: u8,
    entries: [Entry; MAX_RECORDS],
}

impl LogStore<Compact> for CompactLog {
    fn len(&self) -> usize {
        self.len as usize
    }
    fn get(&self, offset: Offset) -> Option<Entry> {
        CompactLog::get(self, offset)
    }
    fn iter_from(&self, from: usize) -> impl Iterator<Item = Entry> + '_ {
        self.entries().iter().skip(from).copied()
    }
    fn agrees_below(&self, other: &Self, offset: Offset) -> bool {
        CompactLog::agrees_below(self, other, offset)
    }
    fn append(&mut self, entry: Entry) {
        CompactLog::append(self, entry)
    }
    fn truncate(&mut self, offset: Offset) {
        CompactLog::truncate(self, offset)
    }
    fn from_entries(entries: Vec<Entry>) -> Option<Self> {
        let mut log = CompactLog::default();
        if entries.len() > MAX_RECORDS {
            return None;
        }
        for e in entries {
            log.append(e);
        }
        Some(log)
    }
}

impl CompactLog {
    /// The log end offset.
    pub fn leo(&self) -> Offset {
        self.len
    }
    pub fn entries(&self) -> &[Entry] {
        &self.entries[..self.len as usize]
    }
    /// Every entry slot, the unused ones (past the LEO) at their default.
    pub fn padded_entries(&self) -> &[Entry; MAX_RECORDS] {
        &self.entries
    }
    pub fn get(&self, offset: Offset) -> Option<Entry> {
        self.entries().get(offset as usize).copied()
    }
    pub fn last(&self) -> Option<Entry> {
        self.entries().last().copied()
    }
    pub fn append(&mut self, entry: Entry) {
        self.entries[self.len as usize] = entry;
        self.len += 1;
    }
    /// Cuts the log back to `offset` (nothing when it is already shorter).
    pub fn truncate(&mut self, offset: Offset) {
        while self.len > offset {
            self.len -= 1;
            self.entries[self.len as usize] = Entry::default();
        }
    }
    /// Whether both logs hold the same entries below `offset`.
    pub fn agrees_below(&self, other: &CompactLog, offset: Offset) -> bool {
        let n = offset as usize;
        self.entries().len() >= n
            && other.entries().len() >= n
            && self.entries[..n] == other.entries[..n]
    }
}

impl std::fmt::Debug for CompactLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries()).finish()
    }
}

/// What a replica believes about the partition's leader.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize,
)]
pub enum LeaderView {
    /// Never told, or restarted and not yet told.
    #[default]
    Unknown,
    /// Told that the partition has no leader.
    NoLeader,
    Replica(ReplicaId),
}

/// One replica (broker) of the partition.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(bound(
    serialize = "S::Log: Serialize, S::Offset: Serialize, S::Epoch: Serialize, S::Pending: Serialize",
    deserialize = "S::Log: Deserialize<'de>, S::Offset: Deserialize<'de>, S::Epoch: Deserialize<'de>, S::Pending: Deserialize<'de>"
))]
pub struct Replica<S: Shape = Compact> {
    pub alive: bool,
    pub log: S::Log,
    pub hw: S::Offset,
    /// Everything below it has been flushed (fsynced).
    pub recovery_point: S::Offset,
    /// The HW last written to `replication-offset-checkpoint`: Kafka writes
    /// it every `replica.high.watermark.checkpoint.interval.ms` and on a
    /// clean shutdown, so a replica that crashes uncleanly comes back with
    /// this HW (within its recovered log), older or newer than the one it had.
    pub hw_checkpoint: S::Offset,
    /// The latest leader epoch this replica has accepted.
    pub epoch: Option<S::Epoch>,
    pub leader: LeaderView,
    /// The ISR as this replica knows it; kept only while it leads.
    pub isr: ReplicaSet,
    /// As leader: each follower's LEO, learnt from its last fetch offset in
    /// this leadership (None until it fetches).
    pub follower_leo: [Option<S::Offset>; MAX_REPLICAS],
    /// As leader: followers whose last fetch came from an incarnation that has
    /// since crashed. Their LEO still counts for the HW (the leader cannot
    /// know), but KIP-903 keeps them out of the ISR until they fetch again.
    pub stale_fetch: ReplicaSet,
    /// As leader: acks=all produce requests waiting for the HW (record ids).
    pub pending_acks: S::Pending,
    /// Down after an unclean crash, until it restarts.
    pub unclean_down: bool,
}

impl Copy for Replica<Compact> {}

impl<S: Shape> Replica<S> {
    pub fn leo(&self) -> S::Offset {
        self.log.leo()
    }
    /// Alive and believing itself the leader: it accepts writes.
    pub fn presumes_leadership(&self, me: ReplicaId) -> bool {
        self.alive && self.leader == LeaderView::Replica(me)
    }
    /// Cuts the log back to `offset`, keeping HW and recovery point within it.
    pub fn truncate_to(&mut self, offset: S::Offset) {
        self.log.truncate(offset);
        self.hw = self.hw.min(self.leo());
        self.recovery_point = self.recovery_point.min(self.leo());
    }
    /// Where this replica began leading `epoch` (Kafka's
    /// `leaderEpochStartOffsetOpt`): its first record of that epoch (one
    /// leader per epoch, so no one else wrote it), or its LEO if it has none
    /// (a leader's log only grows while it leads).
    pub fn leader_epoch_start(&self, epoch: S::Epoch) -> S::Offset {
        self.log
            .epoch_starts()
            .find(|&(e, _)| e == epoch)
            .map_or(self.leo(), |(_, start)| start)
    }
    /// Forgets everything that belongs to a leadership (follower LEOs, the
    /// cached ISR, waiting producers).
    pub fn clear_leader_state(&mut self) {
        self.isr = ReplicaSet::EMPTY;
        self.follower_leo = [None; MAX_REPLICAS];
        self.stale_fetch = ReplicaSet::EMPTY;
        self.pending_acks = S::Pending::default();
    }
}

/// The controller's quorum state for the partition (ZooKeeper or KRaft).
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize,
)]
#[serde(bound(
    serialize = "S::Epoch: Serialize",
    deserialize = "S::Epoch: Deserialize<'de>"
))]
pub struct Controller<S: Shape = Compact> {
    pub leader: Option<ReplicaId>,
    /// The current leader epoch; None before the first election.
    pub epoch: Option<S::Epoch>,
    pub isr: ReplicaSet,
    /// KIP-966 eligible leader replicas.
    pub elr: ReplicaSet,
    /// KIP-966's LastKnownElr: the last leader, remembered while the
    /// partition is leaderless (Kafka 4.x keeps the last leader there).
    pub lke: ReplicaSet,
    /// The leader recovery state is RECOVERING: the leader was elected
    /// uncleanly (or as last known leader) and has not yet changed the ISR.
    pub recovering: bool,
    /// Live brokers the controller fenced (it believed them failed: missed
    /// heartbeats) and has not unfenced since: no acceptable leader and no
    /// ISR member (KIP-841) until ControllerUnfence. Kept only where it can
    /// unblock an election (`controller::fence_matters`), and while alive
    /// (down, a broker is no acceptable leader anyway; it comes back
    /// registered).
    pub fenced: ReplicaSet,
}

impl<S: Shape> Controller<S> {
    /// The epoch the next LeaderAndIsr will carry.
    pub fn next_epoch(&self) -> S::Epoch {
        self.epoch.map_or(S::Epoch::ZERO, |e| e + S::Epoch::ONE)
    }
}

/// A LeaderAndIsr request. There is at most one per epoch, so the epoch is
/// its slot in [`State::requests`].
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize,
)]
pub struct Request {
    pub leader: Option<ReplicaId>,
    pub isr: ReplicaSet,
    /// The ISRs the controller held in this epoch that its leader has not
    /// yet applied, oldest first: those between the leader's copy and the
    /// controller's current ISR while the epoch is current, and the ISR it
    /// ended with once the controller left it. Kept only while the epoch's
    /// leader leads in it, or may still take its request (empty
    /// otherwise). A broker applies a partition's metadata changes in
    /// order, so a leader learns them one by one, even after the
    /// controller moved on (LeaderLearnsIsr).
    pub later_isrs: IsrChain,
}

/// The ISRs of one epoch its leader has still to apply, oldest first, as a
/// fixed array padded with empty sets (an element always names the leader,
/// so it is never empty). Each is the ISR less at least one member of the
/// one before: within an epoch the controller only removes (additions go
/// through the leader's AlterPartition, which leaves it nothing to apply),
/// and the first lacks a member of the leader's copy, or of the request's
/// ISR for a leader that has not taken it. With at most [`MAX_REPLICAS`]
/// replicas, and the leader in every element, that is at most
/// `MAX_REPLICAS - 1` elements, in any shape.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize,
)]
pub struct IsrChain(pub [ReplicaSet; MAX_REPLICAS - 1]);

impl IsrChain {
    pub const EMPTY: IsrChain = IsrChain([ReplicaSet::EMPTY; MAX_REPLICAS - 1]);

    /// The chain of `isrs`, or None beyond the bound (or holding an empty
    /// set, which no chain holds).
    pub fn of(isrs: &[ReplicaSet]) -> Option<IsrChain> {
        let mut out = IsrChain::EMPTY;
        if isrs.len() > out.0.len() || isrs.contains(&ReplicaSet::EMPTY) {
            return None;
        }
        out.0[..isrs.len()].copy_from_slice(isrs);
        Some(out)
    }
    pub fn len(self) -> usize {
        self.0.iter().take_while(|x| !x.is_empty()).count()
    }
    pub fn is_empty(self) -> bool {
        self.0[0].is_empty()
    }
    pub fn iter(self) -> impl Iterator<Item = ReplicaSet> {
        self.0.into_iter().take_while(|x| !x.is_empty())
    }
    /// The next ISR to apply.
    pub fn first(self) -> Option<ReplicaSet> {
        Some(self.0[0]).filter(|x| !x.is_empty())
    }
    /// The chain without its first element.
    pub fn rest(self) -> IsrChain {
        let mut out = IsrChain::EMPTY;
        out.0[..self.0.len() - 1].copy_from_slice(&self.0[1..]);
        out
    }
    /// The chain with `isr` appended. Past the bound it panics: that would
    /// be a controller adding to the ISR on its own, which no rule does.
    pub fn pushed(self, isr: ReplicaSet) -> IsrChain {
        let mut out = self;
        let at = self.len();
        assert!(
            at < out.0.len() && !isr.is_empty(),
            "an epoch's ISR chain {self:?} cannot take {isr:?}: beyond the model's bound"
        );
        out.0[at] = isr;
        out
    }
    pub fn renamed(self, map: &[ReplicaId; MAX_REPLICAS]) -> IsrChain {
        IsrChain(self.0.map(|x| x.renamed(map)))
    }
}

/// What happened to one record, for the properties.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize,
)]
#[serde(bound(
    serialize = "S::Offset: Serialize, S::Epoch: Serialize",
    deserialize = "S::Offset: Deserialize<'de>, S::Epoch: Deserialize<'de>"
))]
pub struct RecordHistory<S: Shape = Compact> {
    /// Where the leader appended it.
    pub offset: S::Offset,
    /// The lowest leader epoch at which the producer was told it is written.
    pub acked: Option<S::Epoch>,
    /// The lowest leader epoch at which it was below a presumed leader's HW,
    /// i.e. visible to consumers (committed).
    pub visible: Option<S::Epoch>,
}

/// The whole model state.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(bound(
    serialize = "Replica<S>: Serialize, Controller<S>: Serialize, S::Requests: Serialize, S::RecordId: Serialize, S::Records: Serialize, S::Count: Serialize",
    deserialize = "Replica<S>: Deserialize<'de>, Controller<S>: Deserialize<'de>, S::Requests: Deserialize<'de>, S::RecordId: Deserialize<'de>, S::Records: Deserialize<'de>, S::Count: Deserialize<'de>"
))]
pub struct State<S: Shape = Compact> {
    /// Replica count (constant; kept here because symmetry reduction is a
    /// plain function of the state).
    pub n: u8,
    pub replicas: [Replica<S>; MAX_REPLICAS],
    pub controller: Controller<S>,
    /// LeaderAndIsr requests ever sent, by epoch. Never removed: a replica
    /// may observe any of them late, twice, or out of order.
    pub requests: S::Requests,
    /// How many records the producer has sent: the next record's id.
    pub produced: S::RecordId,
    /// By record id.
    pub records: S::Records,
    pub clean_crashes: S::Count,
    pub unclean_crashes: S::Count,
    pub leader_moves: S::Count,
}

impl Copy for State<Compact> {}

impl<S: Shape> State<S> {
    pub fn ids(&self) -> std::ops::Range<ReplicaId> {
        0..self.n
    }
    pub fn replica(&self, r: ReplicaId) -> &Replica<S> {
        &self.replicas[r as usize]
    }
    pub fn replica_mut(&mut self, r: ReplicaId) -> &mut Replica<S> {
        &mut self.replicas[r as usize]
    }
    /// Replicas that are alive and believe they lead.
    pub fn presumed_leaders(&self) -> impl Iterator<Item = ReplicaId> + '_ {
        self.ids()
            .filter(|&r| self.replica(r).presumes_leadership(r))
    }
    pub fn request(&self, epoch: S::Epoch) -> Option<Request> {
        self.requests.as_slice().get(epoch.idx()).copied().flatten()
    }
    pub fn set_request(&mut self, epoch: S::Epoch, request: Request) {
        *self.requests.slot(epoch.idx()) = Some(request);
    }
    /// Forgets epoch `epoch`'s request (`actions::dead_request`).
    pub fn drop_request(&mut self, epoch: S::Epoch) {
        *self.requests.slot(epoch.idx()) = None;
    }
    /// Epochs that have had a request, in order (requests are sent only
    /// in the controller's epoch, and epochs only grow).
    pub fn request_epochs(&self) -> impl Iterator<Item = S::Epoch> {
        let upto = self.controller.epoch.map_or(0, |e| e.idx() + 1);
        (0..upto.min(self.requests.as_slice().len())).map(S::Epoch::at)
    }
    pub fn record_mut(&mut self, id: S::RecordId) -> &mut RecordHistory<S> {
        self.records.slot(id.idx())
    }
    /// The histories of the records produced so far: the first `produced`,
    /// or all the state keeps if the count is past them (no model step gets
    /// there; a state read or made by hand may).
    pub fn produced_records(&self) -> ProducedRecords<'_, S> {
        ProducedRecords {
            table: &self.records,
            len: self.produced.idx().min(self.records.len()),
        }
    }
}

/// The histories of the records produced so far, by id
/// ([`State::produced_records`]).
pub struct ProducedRecords<'a, S: Shape> {
    table: &'a S::Records,
    len: usize,
}

impl<'a, S: Shape> ProducedRecords<'a, S> {
    pub fn iter(&self) -> impl Iterator<Item = &'a RecordHistory<S>> + 'a {
        self.table.iter().take(self.len)
    }
    pub fn get(&self, id: usize) -> Option<&'a RecordHistory<S>> {
        (id < self.len).then(|| self.table.get(id)).flatten()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn to_vec(&self) -> Vec<RecordHistory<S>> {
        self.iter().copied().collect()
    }
}

impl State {}

// Hashing writes every field as one byte into a buffer and hashes that once:
// the checker hashes every state it meets, and field-by-field hashing was a
// large share of its time. One byte a field keeps the encoding injective, so
// distinct states never share an encoding. The same bytes are the state as
// the checker's queues hold it (`Checkable::pack`, about half its size),
// given back by `decode`, the encoding's exact inverse.

/// The order that renames no replica.
pub const IDENTITY: [ReplicaId; MAX_REPLICAS] = [0, 1, 2, 3, 4];

/// The renaming (old id -> new id) that places replica `order[i]` at `i`,
/// for the first `n`; ids past them map to 0, as no state names them.
pub fn renaming(n: u8, order: &[ReplicaId; MAX_REPLICAS]) -> [ReplicaId; MAX_REPLICAS] {
    let mut map = [0u8; MAX_REPLICAS];
    for (new, &old) in order[..n as usize].iter().enumerate() {
        map[old as usize] = new as ReplicaId;
    }
    map
}

/// Bytes of the encoding, at most (a request's chain of ISRs to apply,
/// one byte when empty, takes up to `MAX_REPLICAS - 2` more when full).
pub const ENCODED_MAX: usize = 24 * MAX_REPLICAS + 64 + EPOCH_SLOTS * (MAX_REPLICAS - 2);

fn opt(x: Option<u8>) -> u8 {
    x.map_or(0xff, |v| v)
}

fn unopt(b: u8) -> Option<u8> {
    (b != 0xff).then_some(b)
}

/// How [`State::decode_as`] decodes: exactly, or with a flaw planted for
/// the round-trip test to catch.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoding {
    Exact,
    /// Drops the controller's epoch (decoded as None).
    DropsControllerEpoch,
}

/// How [`State::encode_renamed_into_as`] renames: exactly, or with a flaw
/// planted for the packing test to catch.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renaming {
    Exact,
    /// Leaves each leader's follower LEOs in their old slots.
    KeepsFollowerSlots,
}

impl State {
    /// Appends the state's encoding to `out`: the bytes its `Hash` writes.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        append_encoded(out, |buf| self.encode(buf));
    }

    /// The state whose encoding `bytes` is ([`encode_into`](Self::encode_into)'s
    /// exact inverse). Only bytes the encoding wrote are ever decoded; others
    /// panic or give a state no encoding makes.
    pub fn decode(bytes: &[u8]) -> State {
        State::decode_as(bytes, Decoding::Exact)
    }

    /// [`decode`](Self::decode), or with a planted flaw.
    #[doc(hidden)]
    #[inline]
    pub fn decode_as(bytes: &[u8], how: Decoding) -> State {
        let mut at = 0;
        let mut get = || {
            let b = bytes[at];
            at += 1;
            b
        };
        // Built field by field without `..` (as `encode` destructures), in
        // the encoding's order: a field added to the state fails to compile
        // here until it is decoded.
        let n = get();
        let mut replicas = [Replica::default(); MAX_REPLICAS];
        for r in &mut replicas[..n as usize] {
            let len = get();
            let mut entries = [Entry::default(); MAX_RECORDS];
            for e in &mut entries {
                let id = get();
                let epoch = get();
                *e = Entry { id, epoch };
            }
            let log = CompactLog { len, entries };
            let alive = get() != 0;
            let hw = get();
            let recovery_point = get();
            let hw_checkpoint = get();
            let epoch = unopt(get());
            let leader = match get() {
                0xfe => LeaderView::Unknown,
                0xff => LeaderView::NoLeader,
                l => LeaderView::Replica(l),
            };
            let isr = ReplicaSet(get());
            let mut follower_leo = [None; MAX_REPLICAS];
            for x in &mut follower_leo {
                *x = unopt(get());
            }
            let stale_fetch = ReplicaSet(get());
            let pending_acks = get();
            let unclean_down = get() != 0;
            *r = Replica {
                alive,
                log,
                hw,
                recovery_point,
                hw_checkpoint,
                epoch,
                leader,
                isr,
                follower_leo,
                stale_fetch,
                pending_acks,
                unclean_down,
            };
        }
        let leader = unopt(get());
        let epoch = match (unopt(get()), how) {
            (_, Decoding::DropsControllerEpoch) => None,
            (e, Decoding::Exact) => e,
        };
        let controller = Controller {
            leader,
            epoch,
            isr: ReplicaSet(get()),
            elr: ReplicaSet(get()),
            lke: ReplicaSet(get()),
            recovering: get() != 0,
            fenced: ReplicaSet(get()),
        };
        let mut requests = [None; EPOCH_SLOTS];
        for req in &mut requests {
            *req = match get() {
                0xfe => None,
                leader => Some(Request {
                    leader: unopt(leader),
                    isr: ReplicaSet(get()),
                    later_isrs: {
                        // As encoded: the elements, then an empty set
                        // unless the chain is full.
                        let mut chain = IsrChain::EMPTY;
                        for x in &mut chain.0 {
                            *x = ReplicaSet(get());
                            if x.is_empty() {
                                break;
                            }
                        }
                        chain
                    },
                }),
            };
        }
        let produced = get();
        let mut records = [RecordHistory::default(); MAX_RECORDS];
        for r in &mut records {
            *r = RecordHistory {
                offset: get(),
                acked: unopt(get()),
                visible: unopt(get()),
            };
        }
        let clean_crashes = get();
        let unclean_crashes = get();
        let leader_moves = get();
        debug_assert_eq!(at, bytes.len(), "the whole encoding is decoded");
        State {
            n,
            replicas,
            controller,
            requests,
            produced,
            records,
            clean_crashes,
            unclean_crashes,
            leader_moves,
        }
    }

    fn encode(&self, buf: &mut Unwritten) -> usize {
        self.encode_as::<false, false>(&IDENTITY, buf)
    }

    /// Appends the encoding of [`renamed`](Self::renamed)`(order)` to `out`
    /// without building that state (the search encodes each successor's
    /// representative this way: building it was a tenth of its time), or
    /// with a planted flaw.
    #[doc(hidden)]
    #[inline]
    pub fn encode_renamed_into_as(
        &self,
        order: &[ReplicaId; MAX_REPLICAS],
        out: &mut Vec<u8>,
        how: Renaming,
    ) {
        append_encoded(out, |buf| match how {
            Renaming::Exact => self.encode_as::<true, false>(order, buf),
            Renaming::KeepsFollowerSlots => self.encode_as::<true, true>(order, buf),
        });
    }

    // Every struct is destructured without `..`: a field added to the state
    // fails to compile here until it is encoded, so no field can be left out
    // of the fingerprint (states differing only in it would be merged).
    // `RENAME` writes replica `order[i]` as replica `i`, as `renamed` does;
    // without it the state is written as it is. `FLAWED` leaves the
    // leader's follower LEOs in their old slots (`Renaming`).
    #[inline]
    fn encode_as<const RENAME: bool, const FLAWED: bool>(
        &self,
        order: &[ReplicaId; MAX_REPLICAS],
        buf: &mut Unwritten,
    ) -> usize {
        let map = if RENAME {
            renaming(self.n, order)
        } else {
            IDENTITY
        };
        let id = |r: ReplicaId| if RENAME { map[r as usize] } else { r };
        let set = |x: ReplicaSet| if RENAME { x.renamed(&map) } else { x };
        let mut w = Cursor { buf, n: 0 };
        let State {
            n: replica_count,
            replicas,
            controller,
            requests,
            produced,
            records,
            clean_crashes,
            unclean_crashes,
            leader_moves,
        } = self;
        w.put(*replica_count);
        for &old in &order[..*replica_count as usize] {
            let r = &replicas[old as usize];
            let Replica {
                alive,
                log,
                hw,
                recovery_point,
                hw_checkpoint,
                epoch,
                leader,
                isr,
                follower_leo,
                stale_fetch,
                pending_acks,
                unclean_down,
            } = r;
            // A block of fixed size: every index in it is known when
            // compiled, so its writes need no bounds checks.
            let mut block = [MaybeUninit::uninit(); REPLICA_BYTES];
            let mut b = Cursor {
                buf: &mut block,
                n: 0,
            };
            b.put(log.len);
            for Entry { id, epoch } in &log.entries {
                b.put(*id);
                b.put(*epoch);
            }
            b.put(u8::from(*alive));
            b.put(*hw);
            b.put(*recovery_point);
            b.put(*hw_checkpoint);
            b.put(opt(*epoch));
            b.put(match leader {
                LeaderView::Unknown => 0xfe,
                LeaderView::NoLeader => 0xff,
                LeaderView::Replica(l) => id(*l),
            });
            b.put(set(*isr).0);
            // The follower renamed `j` is the one `order` places there;
            // slots past the replica count hold nothing.
            for (j, &f) in order.iter().enumerate() {
                let x = if !RENAME || FLAWED {
                    follower_leo[j]
                } else if j < *replica_count as usize {
                    follower_leo[f as usize]
                } else {
                    None
                };
                b.put(opt(x));
            }
            b.put(set(*stale_fetch).0);
            b.put(*pending_acks);
            b.put(u8::from(*unclean_down));
            assert_eq!(b.n, REPLICA_BYTES, "a replica's block is written whole");
            w.put_all(&block);
        }
        let Controller {
            leader,
            epoch,
            isr,
            elr,
            lke,
            recovering,
            fenced,
        } = controller;
        w.put(opt(leader.map(id)));
        w.put(opt(*epoch));
        w.put(set(*isr).0);
        w.put(set(*elr).0);
        w.put(set(*lke).0);
        w.put(u8::from(*recovering));
        w.put(set(*fenced).0);
        for req in requests {
            match req {
                None => w.put(0xfe),
                Some(Request {
                    leader,
                    isr,
                    later_isrs,
                }) => {
                    w.put(opt(leader.map(id)));
                    w.put(set(*isr).0);
                    // The elements and an empty set ending them: one byte
                    // for the usual empty chain.
                    for x in later_isrs.iter() {
                        w.put(set(x).0);
                    }
                    if later_isrs.len() < later_isrs.0.len() {
                        w.put(0);
                    }
                }
            }
        }
        w.put(*produced);
        for RecordHistory {
            offset,
            acked,
            visible,
        } in records
        {
            w.put(*offset);
            w.put(opt(*acked));
            w.put(opt(*visible));
        }
        w.put(*clean_crashes);
        w.put(*unclean_crashes);
        w.put(*leader_moves);
        w.n
    }
}

/// Bytes of one replica's encoding.
const REPLICA_BYTES: usize = 2 * MAX_RECORDS + MAX_REPLICAS + 11;

/// Room for one encoding, not yet written.
type Unwritten = [MaybeUninit<u8>; ENCODED_MAX];

/// Appends what `encode` writes (it returns how many bytes) to `out`,
/// written in place: neither zeroed first nor copied from a buffer (both
/// showed in the search's time, which encodes every successor).
#[inline(always)]
fn append_encoded(out: &mut Vec<u8>, encode: impl FnOnce(&mut Unwritten) -> usize) {
    out.reserve(ENCODED_MAX);
    let start = out.len();
    let room: &mut Unwritten = (&mut out.spare_capacity_mut()[..ENCODED_MAX])
        .try_into()
        .expect("room for one encoding was reserved");
    let n = encode(room);
    // SAFETY: `encode` wrote its `n` bytes through a `Cursor`, which writes
    // every byte from the first up to the count it returns.
    unsafe { out.set_len(start + n) };
}

/// Writes bytes one after another into an array; `n` bytes from the first
/// are written.
struct Cursor<'a, const N: usize> {
    buf: &'a mut [MaybeUninit<u8>; N],
    n: usize,
}

impl<const N: usize> Cursor<'_, N> {
    #[inline(always)]
    fn put(&mut self, b: u8) {
        self.buf[self.n] = MaybeUninit::new(b);
        self.n += 1;
    }

    /// Puts the first `bytes.len()` bytes, all written.
    #[inline(always)]
    fn put_all<const M: usize>(&mut self, bytes: &[MaybeUninit<u8>; M]) {
        self.buf[self.n..self.n + M].copy_from_slice(bytes);
        self.n += M;
    }
}

impl std::hash::Hash for State<Compact> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let mut buf = [MaybeUninit::uninit(); ENCODED_MAX];
        let n = self.encode(&mut buf);
        // SAFETY: as in `append_encoded`, the first `n` bytes are written.
        h.write(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) });
    }
}

impl std::hash::Hash for State<Unbounded> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.n.hash(h);
        self.replicas.hash(h);
        self.controller.hash(h);
        self.requests.hash(h);
        self.produced.hash(h);
        self.records.hash(h);
        self.clean_crashes.hash(h);
        self.unclean_crashes.hash(h);
        self.leader_moves.hash(h);
    }
}
