//! The stateright model of one partition.

use crate::actions::{self, Action};
use crate::config::Config;
use crate::presets::Preset;
use crate::state::{Controller, Replica, ReplicaSet, State};
use stateright::{Model, Property};

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
