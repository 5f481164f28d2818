//! Symmetry reduction over replica ids: replicas are interchangeable, so a
//! state is stored as the canonical member of its class. Replicas are sorted
//! by what they hold (data that names no replica); replicas that tie are
//! tried in every order, and the least resulting state is the representative.
//! Two states that differ only by renaming replicas thus have the same one.

use crate::state::{LeaderView, ReplicaId, State, MAX_REPLICAS};
use stateright::Representative;

impl Representative for State {
    fn representative(&self) -> Self {
        let n = self.n as usize;
        let mut order: [ReplicaId; MAX_REPLICAS] = [0, 1, 2, 3, 4];
        let key = |r: ReplicaId| {
            let x = self.replica(r);
            let role = match x.leader {
                LeaderView::Unknown => 0,
                LeaderView::NoLeader => 1,
                LeaderView::Replica(l) if l == r => 2,
                LeaderView::Replica(_) => 3,
            };
            let c = &self.controller;
            (
                (x.alive, x.log, x.hw, x.recovery_point, x.epoch, role),
                (x.unclean_down, x.pending_acks, x.isr.len()),
                (c.leader == Some(r), c.isr.contains(r), c.elr.contains(r)),
            )
        };
        order[..n].sort_by_key(|&r| key(r));
        // Most states the search meets are already in order.
        let identity = order[..n].iter().enumerate().all(|(i, &r)| i == r as usize);
        let mut best = if identity {
            *self
        } else {
            self.renamed(&order)
        };
        // Every order of each run of tied replicas.
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
            permute_runs(&runs, 0, &mut order, &mut |o| {
                let candidate = self.renamed(o);
                if candidate < best {
                    best = candidate;
                }
            });
        }
        best
    }
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
        let mut map = [0u8; MAX_REPLICAS];
        for (new, &old) in order[..n].iter().enumerate() {
            map[old as usize] = new as ReplicaId;
        }
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
        for req in out.requests.iter_mut().flatten() {
            req.leader = req.leader.map(rename);
            req.isr = req.isr.renamed(&map);
        }
        out
    }
}
