//! The search's second phase: the recovery states beyond the bounds,
//! which the progress check needs (phase 1 is `bounded_levels`).

use super::*;

impl<M> Run<'_, M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    /// Phase 2: the recovery states, level by level (walked, or expanded
    /// where a walk does not meet every goal). False when stopped.
    pub(super) fn recovery_levels(
        &mut self,
        worker: &mut Worker,
        mut level: Vec<(u32, M::State)>,
    ) -> bool {
        let sh = self.sh;
        let mut enabled = Vec::new();
        self.fig.progress.recovery_phase = true;
        let sizes = self.all_gather(
            worker,
            Summary {
                keys: level.len() as u64,
                ..Summary::default()
            },
        );
        let mut widest = sizes.iter().map(|s| s.keys).max().unwrap_or(0);
        while widest > 0 {
            let mut walked = 0u64;
            let mut recovery = 0u64;
            let mut states = std::mem::take(&mut level).into_iter();
            for _ in 0..rounds(widest, sh.slices.states) {
                for (n, s) in states.by_ref().take(sh.slices.states) {
                    let fp = self.store.fps[n as usize];
                    let e = expand(sh, Phase::Recovery, &s, true, &mut enabled);
                    self.store.flags[n as usize] |= e.flags | flag::EXPANDED;
                    if e.walked {
                        walked += 1;
                        continue;
                    }
                    let edge_start = self.store.edges.len() as u32;
                    let mut edge_len = 0u16;
                    for succ in e.successors {
                        if self.lost(succ.fp) {
                            continue;
                        }
                        if !succ.fault {
                            self.store.edges.push(succ.fp);
                            edge_len += 1;
                        }
                        let to = self.owner(succ.fp);
                        let msg = StateMsg {
                            fp: succ.fp,
                            parent: fp,
                            key: (0, succ.action),
                            in_bounds: false,
                            state: succ.rep,
                        };
                        if to != self.me {
                            self.states.send(to, msg);
                        } else if !self.store.index.contains_key(&msg.fp) {
                            let n = self.store.add(msg.fp, msg.parent, 0, 0);
                            recovery += 1;
                            level.push((n, msg.state));
                        }
                    }
                    self.store.edge_start[n as usize] = edge_start;
                    self.store.edge_len[n as usize] = edge_len;
                }
                for m in self.states.finish(worker) {
                    if !self.store.index.contains_key(&m.fp) {
                        let n = self.store.add(m.fp, m.parent, 0, 0);
                        recovery += 1;
                        level.push((n, m.state));
                    }
                }
            }
            let summaries = self.all_gather(
                worker,
                Summary {
                    keys: level.len() as u64,
                    recovery,
                    walked,
                    stop: self.stop.load(Ordering::Relaxed),
                    ..Summary::default()
                },
            );
            let p = &mut self.fig.progress;
            p.recovery_states += summaries.iter().map(|s| s.recovery).sum::<u64>();
            p.recovery_walked += summaries.iter().map(|s| s.walked).sum::<u64>();
            self.report();
            if summaries.iter().any(|s| s.stop) {
                return false;
            }
            widest = summaries.iter().map(|s| s.keys).max().unwrap_or(0);
        }
        true
    }
}
