//! Paths: each state's chain of parents, chased from owner to owner back
//! to an initial state.

use super::*;

impl<M> Run<'_, M>
where
    M: Checkable + 'static,
    M::State: Serialize + DeserializeOwned + 'static,
{
    /// Each target's chain of (fingerprint, in bounds) from an initial
    /// state, chased from owner to owner (worker 0 gets them all).
    pub(super) fn chase(
        &mut self,
        worker: &mut Worker,
        targets: &[Option<u64>],
    ) -> Option<Vec<Option<Chain>>> {
        let mut found: Vec<Option<Chain>> = vec![None; targets.len()];
        if self.me == 0 {
            for (q, t) in targets.iter().enumerate() {
                if let Some(fp) = *t {
                    let to = self.owner(fp);
                    self.rounds.send(
                        to,
                        Msg::Chase {
                            query: q as u32,
                            at: fp,
                            chain: Vec::new(),
                        },
                    );
                }
            }
        }
        // A chain is at most as long as the deepest state; one round more
        // brings the last to worker 0.
        for _ in 0..self.fig.progress.max_depth + 3 {
            for m in self.rounds.finish(worker) {
                match m {
                    Msg::Chase {
                        query,
                        at,
                        mut chain,
                    } => {
                        let n = self.store.index[&at];
                        chain.push((at, self.store.in_bounds(n)));
                        let parent = self.store.parent[n as usize];
                        if parent == at {
                            chain.reverse();
                            self.rounds.send(0, Msg::Chain { query, chain });
                        } else {
                            let to = self.owner(parent);
                            self.rounds.send(
                                to,
                                Msg::Chase {
                                    query,
                                    at: parent,
                                    chain,
                                },
                            );
                        }
                    }
                    Msg::Chain { query, chain } => found[query as usize] = Some(chain),
                    _ => {}
                }
            }
        }
        (self.me == 0).then_some(found)
    }
}
