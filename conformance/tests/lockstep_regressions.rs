//! Runs that once made the implementation leave the model, kept so that they
//! never do again. Each is a model path replayed in lockstep.

use highwater_conformance::lockstep::replay;
use highwater_model::controller::Election;
use highwater_model::presets::Preset;
use highwater_model::Action::{self, *};

fn replays_in_lockstep(preset: &str, actions: &[Action]) {
    let p = Preset::find(preset).expect("a preset");
    let dir = tempfile::tempdir().expect("a temporary directory");
    if let Err(d) = replay(&p.config, actions, dir.path()) {
        panic!("{preset}: {d}");
    }
}

/// Unfenced, a follower fetches a record of epoch 2 while following epoch 0,
/// then leads epoch 1 and appends to it: its log's epochs go down. Kafka
/// takes the append (the epoch cache drops the later entry); the storage
/// layer used to refuse it with a storage error.
#[test]
fn a_leader_appends_below_a_later_epoch_it_fetched_unfenced() {
    let (a, b, c) = (0, 1, 2);
    let clean = Election::Clean;
    replays_in_lockstep(
        "unfenced",
        &[
            Crash {
                replica: b,
                clean: false,
            },
            ControllerElectLeader {
                replica: c,
                election: clean,
            },
            ControllerElectLeader {
                replica: a,
                election: clean,
            },
            ControllerElectLeader {
                replica: c,
                election: clean,
            },
            BecomeLeader {
                replica: c,
                epoch: 2,
            },
            Produce {
                leader: c,
                record: 0,
            },
            BecomeFollower {
                replica: a,
                epoch: 0,
            },
            FollowerFetch {
                follower: a,
                leader: c,
            },
            ControllerShrinkIsr { replica: b },
            BecomeLeader {
                replica: a,
                epoch: 1,
            },
            Produce {
                leader: a,
                record: 1,
            },
        ],
    );
}
