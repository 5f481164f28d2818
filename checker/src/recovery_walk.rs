//! A recovery state shown to reach every goal by one path, so that it need
//! not be expanded.
//!
//! The progress check asks of each recovery state only whether some
//! fault-free path leads from it to each goal (`progress.rs`). One path that
//! reaches them proves it; searching every successor proves nothing more.
//! So before a recovery state is expanded, a greedy walk tries: from the
//! state, take the first healing step ([`Checkable::heals`], in the order
//! the recovery model lists actions) that leads to a state not yet on the
//! walk (told by its memo key, below), and stop when every goal has been
//! met, when no step leads anywhere new, or after [`MAX_STEPS`]. The walk
//! takes the same steps, under the same model and through the same
//! [`Checkable::recovery_view`], as the expansion would, so the goals it
//! meets are ones the search would find reachable. A state whose walk
//! falls short is expanded as before: the check's verdicts do not depend
//! on how well the walk does, only its time does.
//!
//! Walks from neighbouring recovery states run into each other. Every
//! state on a walk reaches, by the walk's own steps, the goals met from it
//! on, so a [`WalkMemo`] keeps those goals for each state walked, and a
//! later walk that steps onto one of them adds its goals and stops there.

use std::collections::HashMap;
use std::hash::Hash;

use crate::graph::{all_goals, flag};
use crate::{Checkable, Goal};

/// Whether recovery states are walked before they are expanded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryWalk {
    /// The greedy walk of [`goals_reached`]; a state it takes to every goal
    /// is not expanded.
    #[default]
    Greedy,
    /// Every recovery state is expanded (what the walk must agree with).
    Off,
    /// Broken on purpose: every recovery state is taken to reach every goal
    /// without a walk. A test shows that it hides a state that cannot
    /// reach its goal, so the walk's goals are load-bearing.
    ClaimsEveryGoal,
    /// Broken on purpose: the memo keeps, for every state of a walk, every
    /// goal the walk met, those met before the state too. A test shows
    /// that it hides a state that cannot reach its goal, so the memo must
    /// keep only what is met from each state on.
    MemoOfWholeWalk,
}

/// The goals met from each state of earlier walks on (`flag::GOAL` bits),
/// by the state's 64-bit hash: a later walk reaching one of these states
/// reaches them too. A search keeps one per expansion thread, across
/// batches. Like the search's own fingerprints, two states whose hashes
/// collide are taken for one (a chance of about n^2 / 2^65 for n states).
pub struct WalkMemo {
    goals: HashMap<u64, u8, ahash::RandomState>,
    /// A walk's states' own goals and keys, kept for the next walk.
    own: Vec<u8>,
    keys: Vec<u64>,
}

impl WalkMemo {
    /// Entries kept before the memo starts again empty (about 9 MiB of
    /// table; each expansion part has its own): walks that meet are mostly
    /// of states expanded together. On `safe`, 2^20 saved no more time
    /// and took 150 MiB more.
    pub const MAX_ENTRIES: usize = 1 << 18;

    /// The bytes its table takes (a hashbrown table: the entry and one
    /// control byte per bucket).
    pub fn bytes(&self) -> u64 {
        self.goals.capacity() as u64 * (std::mem::size_of::<(u64, u8)>() as u64 + 1)
    }

    fn key<S: Hash>(&self, s: &S) -> u64 {
        self.goals.hasher().hash_one(s)
    }
}

impl Default for WalkMemo {
    fn default() -> Self {
        WalkMemo {
            // Fixed seeds: a run's walks, and so its timing, replay.
            goals: HashMap::with_hasher(ahash::RandomState::with_seeds(
                0x6869_6768,
                0x7761_7465,
                0x725f_7761,
                0x6c6b_6d65,
            )),
            own: Vec::new(),
            keys: Vec::new(),
        }
    }
}

/// The longest walk tried: a walk that falls short costs only the
/// expansion it did not spare, so a walk is cut where healing plainly
/// takes fewer steps than this.
pub const MAX_STEPS: usize = 48;

/// The goal flags (`flag::GOAL << i`) a state carries itself.
pub fn goals_of<M: Checkable>(model: &M, goals: &[Goal<M>], s: &M::State) -> u8 {
    let mut met = 0;
    for (i, g) in goals.iter().enumerate() {
        if (g.condition)(model, s) {
            met |= flag::GOAL << i;
        }
    }
    met
}

/// The goals a greedy fault-free walk from recovery state `s` meets (as
/// `flag::GOAL` bits), `s`'s own included, and those `memo` knows to be
/// met from a state the walk reaches. `model` is the bounded model (goals
/// and views are its), `recovery` the one recovery states run under;
/// `enabled` is the caller's buffer for action lists, left as it may be.
pub fn goals_reached<M: Checkable>(
    model: &M,
    recovery: &M,
    goals: &[Goal<M>],
    s: &M::State,
    memo: &mut WalkMemo,
    walk_kind: RecoveryWalk,
    enabled: &mut Vec<M::Action>,
) -> u8 {
    let all = all_goals(goals.len());
    // Each walk state's own goals and its key in the memo, in buffers kept
    // from walk to walk (allocating them was a tenth of the recovery
    // phase's time). A state is on the walk when its key is: keys stand
    // for states here as they do in the memo.
    let mut own = std::mem::take(&mut memo.own);
    let mut keys = std::mem::take(&mut memo.keys);
    own.clear();
    keys.clear();
    own.push(goals_of(model, goals, s));
    keys.push(memo.key(s));
    let mut met = own[0];
    // The goals met past the walk's last state, from the memo.
    let mut beyond = memo.goals.get(&keys[0]).copied().unwrap_or(0);
    met |= beyond;
    let mut here = s.clone();
    while met != all && beyond == 0 && keys.len() <= MAX_STEPS {
        enabled.clear();
        recovery.actions(&here, enabled);
        let step = enabled
            .iter()
            .filter(|a| model.heals(&here, a))
            .find_map(|a| {
                let next = model.recovery_view(recovery.successor(&here, a.clone())?);
                let key = memo.key(&next);
                (!keys.contains(&key)).then_some((next, key))
            });
        let Some((next, key)) = step else {
            break;
        };
        if let Some(&known) = memo.goals.get(&key) {
            // Walked before: what is met from it on is known.
            beyond = known | goals_of(model, goals, &next);
            met |= beyond;
            break;
        }
        own.push(goals_of(model, goals, &next));
        met |= own[own.len() - 1];
        keys.push(key);
        here = next;
    }
    if memo.goals.len() + keys.len() > WalkMemo::MAX_ENTRIES {
        memo.goals.clear();
    }
    // Each state reaches what is met from it on: its suffix's goals.
    let mut from_here = beyond;
    for (key, goals) in keys.iter().zip(&own).rev() {
        from_here |= goals;
        let kept = if walk_kind == RecoveryWalk::MemoOfWholeWalk {
            met
        } else {
            from_here
        };
        memo.goals.insert(*key, kept);
    }
    memo.own = own;
    memo.keys = keys;
    met
}
