//! The stateright model of one partition.

use crate::actions::{self, Action};
use crate::config::Config;
use crate::presets::Preset;
use crate::recovery;
use crate::state::{Controller, Replica, ReplicaSet, State, RECOVERY_EPOCHS};
use highwater_checker::{Checkable, Goal};
use stateright::{Model, Property, Representative};

/// A path: the initial state, then each action with the state it leads to.
pub type Trace = highwater_checker::Trace<PartitionModel>;

/// One partition under one configuration.
#[derive(Clone, Debug)]
pub struct PartitionModel {
    pub cfg: Config,
}

impl Default for PartitionModel {
    fn default() -> Self {
        PartitionModel {
            cfg: Preset::default_preset().config,
        }
    }
}

impl PartitionModel {
    pub fn new(cfg: Config) -> Self {
        PartitionModel { cfg }
    }

    /// The one initial state: every replica alive with an empty log, no
    /// leader yet, every replica in the ISR.
    pub fn init_state(&self) -> State {
        let mut s = State {
            n: self.cfg.replicas,
            controller: Controller {
                isr: ReplicaSet::all(self.cfg.replicas),
                ..Controller::default()
            },
            ..State::default()
        };
        for r in s.ids() {
            *s.replica_mut(r) = Replica {
                alive: true,
                ..Replica::default()
            };
        }
        s
    }
}

impl Model for PartitionModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.init_state()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        actions::enabled(&self.cfg, state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        actions::apply(&self.cfg, state, action)
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    fn format_step(&self, last: &State, action: Action) -> Option<String> {
        self.next_state(last, action)
            .map(|next| crate::render::state_table(&next))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::properties::properties()
    }
}

/// What the engine asks beyond stateright's `Model`: the faults, replica
/// symmetry, the epoch bound and recovery beyond it (`recovery.rs`), and
/// the progress goals (`progress.rs`).
impl Checkable for PartitionModel {
    #[inline]
    fn is_fault(&self, state: &State, action: &Action) -> bool {
        action.is_fault(state)
    }

    /// `next_state` compares the states to refuse a step that changes
    /// nothing; `enabled` lists no such step (`enabled_means_changes.rs`),
    /// and the comparison was a twentieth of the search's time.
    #[inline]
    fn successor(&self, state: &State, action: Action) -> Option<State> {
        Some(actions::successor_of(&self.cfg, *state, action))
    }

    #[inline]
    fn representative(&self, state: &State) -> State {
        state.representative()
    }

    #[inline]
    fn within_bounds(&self, state: &State) -> bool {
        recovery::within(self.cfg.max_epoch, state)
    }

    fn recovery_model(&self) -> Self {
        PartitionModel::new(recovery::recovery_config(&self.cfg, RECOVERY_EPOCHS))
    }

    #[inline]
    fn heals(&self, state: &State, action: &Action) -> bool {
        recovery::heals(state, *action)
    }

    #[inline]
    fn recovery_view(&self, state: State) -> State {
        recovery::recovery_view(self.cfg, state)
    }

    /// The queues hold states as their fingerprint's encoding
    /// (`State::encode_into`, about 110 bytes for three replicas against
    /// 217 whole), given back by its inverse, `State::decode`.
    const PACKS: bool = true;

    #[inline]
    fn pack(&self, state: &State, out: &mut Vec<u8>) {
        state.encode_into(out);
    }

    #[inline]
    fn pack_representative(&self, state: &State, out: &mut Vec<u8>) {
        state.encode_representative_into(out);
    }

    #[inline]
    fn unpack(&self, bytes: &[u8]) -> State {
        State::decode(bytes)
    }

    fn progress_goals(&self) -> Vec<Goal<Self>> {
        crate::progress::goals()
    }

    #[inline]
    fn exempt(&self, state: &State) -> bool {
        crate::progress::offline_by_design(&self.cfg, state)
    }
}
