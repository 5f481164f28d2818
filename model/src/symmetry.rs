//! Symmetry reduction over replica ids: replicas are interchangeable, so a
//! state is stored as the representative of its class, with replicas sorted
//! by what they hold and every id renamed accordingly.

use crate::state::{LeaderView, ReplicaId, State, MAX_REPLICAS};
use stateright::Representative;

impl Representative for State {
    fn representative(&self) -> Self {
        let n = self.n as usize;
        // Sort by the replica's own, id-free data; ties may stay in any order
        // (a representative need only be a member of the class).
        let mut order: [ReplicaId; MAX_REPLICAS] = [0, 1, 2, 3, 4];
        order[..n].sort_by_key(|&r| {
            let x = self.replica(r);
            let role = match x.leader {
                LeaderView::Unknown => 0,
                LeaderView::NoLeader => 1,
                LeaderView::Replica(l) if l == r => 2,
                LeaderView::Replica(_) => 3,
            };
            (
                x.alive,
                x.log,
                x.hw,
                x.recovery_point,
                x.epoch,
                role,
                x.unclean_down,
            )
        });
        self.renamed(&order)
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
