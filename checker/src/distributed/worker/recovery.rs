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
        let mut scratch = Scratch::default();
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
                    let e = expand(sh, Phase::Recovery, &s, true, &mut scratch);
                    self.store.flags[n as usize] |= e.flags | flag::EXPANDED;
                    if e.walked {
                        walked += 1;
                        continue;
                    }
                    // Recovery states are not ranked, and lie beyond the
                    // bounds: no transition of the bounded model.
                    self.route(n, 0, e.successors, |store, msg| {
                        if !store.index.contains_key(&msg.fp) {
                            let n = store.add(msg.fp, msg.parent, 0, 0);
                            recovery += 1;
                            level.push((n, msg.state));
                        }
                    });
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
