//! Symmetry reduction over replica ids: replicas are interchangeable, so a
//! state is stored as the canonical member of its class. Replicas are sorted
//! by what they hold (data that names no replica); replicas that tie are
//! tried in every order, and the least resulting state is the representative.
//! Two states that differ only by renaming replicas thus have the same one.

use crate::state::{renaming, LeaderView, Renaming, ReplicaId, State, IDENTITY, MAX_REPLICAS};
use stateright::Representative;

impl Representative for State {
    fn representative(&self) -> Self {
        match self.canonical_order() {
            None => *self,
            Some(order) => self.renamed(&order),
        }
    }
}

impl State {
    /// Appends the encoding of the representative to `out`, without
    /// building it: the same bytes as encoding `representative()`.
    pub fn encode_representative_into(&self, out: &mut Vec<u8>) {
        self.encode_representative_into_as(out, Renaming::Exact)
    }

    /// [`encode_representative_into`](Self::encode_representative_into),
    /// or with a planted flaw.
    #[doc(hidden)]
    #[inline]
    pub fn encode_representative_into_as(&self, out: &mut Vec<u8>, how: Renaming) {
        match self.canonical_order() {
            None => self.encode_into(out),
            Some(order) => self.encode_renamed_into_as(&order, out, how),
        }
    }

    /// The order whose renaming gives the representative (replica
    /// `order[i]` becomes `i`), or None when the state is its own.
    fn canonical_order(&self) -> Option<[ReplicaId; MAX_REPLICAS]> {
        let n = self.n as usize;
        let mut order: [ReplicaId; MAX_REPLICAS] = IDENTITY;
        let mut keys = [(0u64, 0u64); MAX_REPLICAS];
        for (r, k) in keys[..n].iter_mut().enumerate() {
            *k = sort_key(self, r as ReplicaId);
        }
        let key = |r: ReplicaId| keys[r as usize];
        // Insertion sort, stable as `sort_by_key` was: n is at most 5.
        for i in 1..n {
            let mut j = i;
            while j > 0 && key(order[j - 1]) > key(order[j]) {
                order.swap(j - 1, j);
                j -= 1;
            }
        }
        // Every order of each run of tied replicas (rare: under 1 % of the
        // states `safe` meets).
        let mut runs = Vec::new();
        let mut start = 0;
        for i in 1..=n {
            if i == n || key(order[i]) != key(order[start]) {
                if i - start > 1 {
                    runs.push((start, i));
                }
                start = i;
            }
        }
        if !runs.is_empty() {
            let mut best = self.renamed(&order);
            let mut best_order = order;
            permute_runs(&runs, 0, &mut order, &mut |o| {
                let candidate = self.renamed(o);
                if candidate < best {
                    best = candidate;
                    best_order = *o;
                }
            });
            order = best_order;
        }
        // Most states the search meets are already in order.
        let identity = order[..n].iter().enumerate().all(|(i, &r)| i == r as usize);
        (!identity).then_some(order)
    }
}

/// What replica `r` holds, packed so that comparing keys compares, in order:
/// liveness, log, HW, recovery point, epoch and role; whether it went down
/// uncleanly, its waiting producers and the size of its ISR copy; whether
/// the controller names it leader, and whether it is in the controller's
/// ISR, ELR, LastKnownElr and fenced set. None of it names a replica, so
/// renaming replicas permutes keys and changes none. Two words of whole
/// bytes (the bit-packed key this replaced, each field shifted in one by
/// one, was a twelfth of the search's time); the small fields share the
/// last byte and the role's, most significant first, so that the order is
/// the old key's, and with it every representative and the order the
/// search meets states in. A value too large for its bits (no state the
/// model reaches has one) only makes keys tie or misorder, which costs
/// time, never a wrong representative: ties are all tried.
fn sort_key(s: &State, r: ReplicaId) -> (u64, u64) {
    let x = s.replica(r);
    let c = &s.controller;
    let role = match x.leader {
        LeaderView::Unknown => 0,
        LeaderView::NoLeader => 1,
        LeaderView::Replica(l) if l == r => 2,
        LeaderView::Replica(_) => 3,
    };
    let bit = |b: bool, at: u32| u8::from(b) << at;
    // Four entries of two bytes (MAX_RECORDS): this fails to compile if
    // that changes.
    let [e0, e1, e2, e3] = *x.log.padded_entries();
    let head = u64::from_be_bytes([
        u8::from(x.alive),
        x.log.leo(),
        e0.id,
        e0.epoch,
        e1.id,
        e1.epoch,
        e2.id,
        e2.epoch,
    ]);
    let tail = u64::from_be_bytes([
        e3.id,
        e3.epoch,
        x.hw,
        x.recovery_point,
        x.epoch.map_or(0, |e| e.saturating_add(1)),
        role << 1 | u8::from(x.unclean_down),
        x.pending_acks,
        x.isr.len() << 5
            | bit(c.leader == Some(r), 4)
            | bit(c.isr.contains(r), 3)
            | bit(c.elr.contains(r), 2)
            | bit(c.lke.contains(r), 1)
            | bit(c.fenced.contains(r), 0),
    ]);
    (head, tail)
}

/// Calls `visit` with every order obtained by permuting each run in place.
fn permute_runs(
    runs: &[(usize, usize)],
    i: usize,
    order: &mut [ReplicaId; MAX_REPLICAS],
    visit: &mut impl FnMut(&[ReplicaId; MAX_REPLICAS]),
) {
    let Some(&(start, end)) = runs.get(i) else {
        visit(order);
        return;
    };
    // Heap's algorithm over order[start..end].
    let k = end - start;
    let mut c = vec![0usize; k];
    permute_runs(runs, i + 1, order, visit);
    let mut j = 0;
    while j < k {
        if c[j] < j {
            let swap = if j % 2 == 0 { 0 } else { c[j] };
            order.swap(start + swap, start + j);
            permute_runs(runs, i + 1, order, visit);
            c[j] += 1;
            j = 0;
        } else {
            c[j] = 0;
            j += 1;
        }
    }
}
impl State {
    /// The same state with replica `order[i]` renamed `i`.
    pub fn renamed(&self, order: &[ReplicaId; MAX_REPLICAS]) -> State {
        let n = self.n as usize;
        let map = renaming(self.n, order);
        let rename = |r: ReplicaId| map[r as usize];
        let mut out = *self;
        for (new, &old) in order[..n].iter().enumerate() {
            let mut r = self.replicas[old as usize];
            if let LeaderView::Replica(l) = r.leader {
                r.leader = LeaderView::Replica(rename(l));
            }
            r.isr = r.isr.renamed(&map);
            r.stale_fetch = r.stale_fetch.renamed(&map);
            let mut leo = [None; MAX_REPLICAS];
            for (f, v) in self.replicas[old as usize].follower_leo[..n]
                .iter()
                .enumerate()
            {
                leo[rename(f as ReplicaId) as usize] = *v;
            }
            r.follower_leo = leo;
            out.replicas[new] = r;
        }
        out.controller.leader = self.controller.leader.map(rename);
        out.controller.isr = self.controller.isr.renamed(&map);
        out.controller.elr = self.controller.elr.renamed(&map);
        out.controller.lke = self.controller.lke.renamed(&map);
        out.controller.fenced = self.controller.fenced.renamed(&map);
        for req in out.requests.iter_mut().flatten() {
            req.leader = req.leader.map(rename);
            req.isr = req.isr.renamed(&map);
            req.later_isrs = req.later_isrs.renamed(&map);
        }
        out
    }
}
