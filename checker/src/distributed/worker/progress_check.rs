//! The progress check across the workers: each state's predecessors held
//! by its owner, backward reachability as a timely loop (`reach.rs`),
//! stuck states counted, and a stuck state's report.

use super::*;

impl<M> Run<'_, M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    /// Sends every fault-free edge (target, source) to its target's owner,
    /// a slice of edges a worker a round, and hands each arrival to
    /// `arrive` with the target's local index. In slices, so that only a
    /// slice's edges are on their way at once: sent all together they were
    /// the distributed check's peak (every edge in flight and delivered
    /// beside the edges kept).
    fn each_edge_at_its_target(&mut self, worker: &mut Worker, mut arrive: impl FnMut(u32, u64)) {
        let counts = self.all_gather(
            worker,
            Summary {
                edges: self.store.edges.len() as u64,
                ..Summary::default()
            },
        );
        let most = counts.iter().map(|s| s.edges).max().unwrap_or(0);
        let slice = self.sh.slices.edges.max(1);
        let (mut n, mut i) = (0usize, 0usize);
        for _ in 0..rounds(most, slice) {
            let mut sent = 0;
            while sent < slice && n < self.store.fps.len() {
                if i == self.store.edge_len[n] as usize {
                    (n, i) = (n + 1, 0);
                    continue;
                }
                let target = self.store.edges[self.store.edge_start[n] as usize + i];
                (i, sent) = (i + 1, sent + 1);
                if self.sh.flaw == Flaw::DropSliceEnds && sent == slice {
                    continue;
                }
                self.edges
                    .send(self.owner(target), (target, self.store.fps[n]));
            }
            for (target, source) in self.edges.finish(worker) {
                arrive(self.store.index[&target], source);
            }
        }
    }

    /// The progress check's figures, the same in every worker.
    pub(super) fn progress_check(&mut self, worker: &mut Worker) -> Summary {
        let sh = self.sh;
        // Each state's predecessors, kept by its owner: the edges go to
        // their targets' owners twice, to count and then to place them,
        // so that no list of (target, source) pairs is held beside them.
        let nodes = self.store.fps.len();
        let mut start = vec![0u32; nodes + 1];
        self.each_edge_at_its_target(worker, |t, _| start[t as usize + 1] += 1);
        for i in 0..nodes {
            start[i + 1] += start[i];
        }
        let mut sources = vec![0u64; start[nodes] as usize];
        let mut cursor = start.clone();
        self.each_edge_at_its_target(worker, |t, source| {
            sources[cursor[t as usize] as usize] = source;
            cursor[t as usize] += 1;
        });
        drop(cursor);
        // The edges are now held where they lead; the outgoing lists are
        // not needed again (a stuck state's trap is found by expanding).
        self.store.drop_edges();
        let predecessors = Predecessors { start, sources };
        let goal_bits = all_goals(sh.goals.len());
        let seeds: Vec<(u64, u8)> = (0..nodes)
            .filter_map(|n| {
                let bits = self.store.flags[n] & (goal_bits | flag::EXEMPT);
                (bits != 0).then_some((self.store.fps[n], bits))
            })
            .collect();
        let index = Rc::new(std::mem::take(&mut self.store.index));
        let reached = reach::reach(worker, Rc::clone(&index), predecessors, seeds, nodes);
        self.store.index = Rc::try_unwrap(index).unwrap_or_else(|rc| (*rc).clone());
        // Stuck states per goal, and the first of each, as the
        // single-process check orders them: least depth, then rank.
        let key = |n: usize| (self.store.depth[n], self.store.rank[n], self.store.fps[n]);
        let mut s = Summary {
            stuck: vec![0; sh.goals.len()],
            exempt: vec![0; sh.goals.len()],
            first_stuck: vec![None; sh.goals.len()],
            ..Summary::default()
        };
        for n in (0..nodes).filter(|&n| self.store.in_bounds(n as u32)) {
            if self.store.flags[n] & flag::EXEMPT != 0 {
                s.first_exempt = s.first_exempt.min(Some(key(n))).or(Some(key(n)));
            }
            let exempt = reached[n] & flag::EXEMPT != 0;
            for g in 0..sh.goals.len() {
                if reached[n] & (flag::GOAL << g) != 0 {
                    continue;
                }
                if exempt {
                    s.exempt[g] += 1;
                } else {
                    s.stuck[g] += 1;
                    let k = Some(key(n));
                    s.first_stuck[g] = match s.first_stuck[g] {
                        Some(old) if Some(old) < k => Some(old),
                        _ => k,
                    };
                }
            }
        }
        let all = self.all_gather(worker, s);
        let mut out = Summary {
            stuck: vec![0; sh.goals.len()],
            exempt: vec![0; sh.goals.len()],
            first_stuck: vec![None; sh.goals.len()],
            ..Summary::default()
        };
        for w in &all {
            for g in 0..sh.goals.len() {
                out.stuck[g] += w.stuck[g];
                out.exempt[g] += w.exempt[g];
                out.first_stuck[g] = min_some(out.first_stuck[g], w.first_stuck[g]);
            }
            out.first_exempt = min_some(out.first_exempt, w.first_exempt);
        }
        out
    }
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

/// The fingerprint `graph.node_of` looks a state up by.
fn node_fp<M: Checkable>(model: &M, s: &M::State) -> u64 {
    if model.within_bounds(s) {
        fingerprint(model, s)
    } else {
        fingerprint(model, &model.recovery_view(s.clone()))
    }
}

/// A stuck state's report, as `progress.rs` makes it: the fault-free
/// exits, and the continuation into a trap, found by walking forward from
/// the stuck state over the edges the search kept (each state expanded
/// again from its representative, as the search expanded it, so that the
/// edges come in the same order).
pub(super) fn stuck_report<M: Checkable>(sh: &Shared<M>, trace: Trace<M>) -> Stuck<M> {
    let model = &sh.model;
    let recovery = &sh.recovery;
    let last = trace.last().expect("a path has a state").0.clone();
    let mut enabled = Vec::new();
    recovery.actions(&last, &mut enabled);
    let exits = enabled
        .into_iter()
        .filter_map(|a| Some((a.clone(), recovery.next_state(&last, a)?)))
        .filter(|(a, next)| graph::fault_free_edge(model, &last, a, next))
        .collect();
    // The states the stuck one reaches, by node, with their edges.
    let root = model.representative(&last);
    let mut nodes: Vec<(u64, Phase, M::State)> =
        vec![(fingerprint_of_representative(&root), Phase::Bounded, root)];
    let mut index: HashMap<u64, u32> = HashMap::from([(nodes[0].0, 0)]);
    let mut edges: Vec<Vec<u32>> = Vec::new();
    let mut buf = Scratch::default();
    let mut i = 0;
    while i < nodes.len() {
        let (_, phase, s) = &nodes[i];
        let e = expand(sh, *phase, s, false, &mut buf);
        let mut out = Vec::new();
        for succ in e.successors {
            if succ.fault {
                continue;
            }
            let next = index.len() as u32;
            let t = *index.entry(succ.fp).or_insert(next);
            if t == next {
                let phase = if succ.in_bounds {
                    Phase::Bounded
                } else {
                    Phase::Recovery
                };
                nodes.push((succ.fp, phase, succ.rep));
            }
            out.push(t);
        }
        edges.push(out);
        i += 1;
    }
    let (chain, trap_states) = progress::trap_chain(0, |m| &edges[m as usize]);
    let continuation = progress::concrete_path(model, recovery, last, &chain, |s, want| {
        node_fp(model, s) == nodes[want as usize].0
    });
    Stuck {
        trace,
        exits,
        continuation,
        trap_states,
    }
}
