//! Runs that once made the implementation leave the model, kept so that they
//! never do again. Each is a model path replayed in lockstep.

mod common;

use common::scripted;
use highwater_conformance::lockstep::{replay, Lockstep};
use highwater_conformance::mapping::step_action;
use highwater_model::controller::Election;
use highwater_model::presets::Preset;
use highwater_model::Action::{self, *};
use highwater_model::Config;

fn replays_in_lockstep(preset: &str, actions: &[Action]) {
    let p = Preset::find(preset).expect("a preset");
    replays_in_lockstep_with(preset, &p.config, actions);
}

fn replays_in_lockstep_with(name: &str, cfg: &Config, actions: &[Action]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    if let Err(d) = replay(cfg, actions, dir.path()) {
        panic!("{name}: {d}");
    }
}

/// Unfenced, a follower fetches a record of epoch 2 while following epoch 0,
/// then leads epoch 1 and appends to it: its log's epochs go down. Kafka
/// takes the append (the epoch cache drops the later entry); the storage
/// layer used to refuse it with a storage error.
#[test]
fn a_leader_appends_below_a_later_epoch_it_fetched_unfenced() {
    replays_in_lockstep("unfenced", &scripted::epochs_going_down());
}

/// Without KIP-320's fencing a log's epochs can go down (A here ends with
/// a2 b4 c3). The model took KIP-279's exchange to end at the first offset
/// where the logs differ, which holds only while epochs rise, and the
/// implementation answered a request beyond a stale leader's epochs with its
/// latest epoch: at the last step the model kept C's a2 b4, the
/// implementation cut it to a2. Both now run the exchange on epoch caches as
/// Kafka does (UNDEFINED, so C keeps what is below its HW).
#[test]
fn a_follower_truncates_against_a_stale_leader_whose_epochs_go_down() {
    let (a, b, c) = (0, 1, 2);
    let cfg = common::wide(&Preset::find("unfenced").expect("a preset").config);
    replays_in_lockstep_with(
        "unfenced (wide bounds)",
        &cfg,
        &[
            Crash {
                replica: a,
                clean: false,
            },
            Crash {
                replica: c,
                clean: false,
            },
            Restart { replica: a },
            Crash {
                replica: a,
                clean: true,
            },
            Crash {
                replica: b,
                clean: true,
            },
            Restart { replica: c },
            ControllerShrinkIsr { replica: b },
            Restart { replica: a },
            Restart { replica: b },
            ControllerElectLeader {
                replica: b,
                election: Election::Elr,
            },
            ControllerShrinkIsr { replica: b },
            BecomeFollower {
                replica: c,
                epoch: 1,
            },
            BecomeFollower {
                replica: a,
                epoch: 1,
            },
            BecomeFollower {
                replica: b,
                epoch: 1,
            },
            // B, fenced when the controller removed it alive, heartbeats
            // again: a fenced broker is no candidate.
            ControllerUnfence { replica: b },
            ControllerElectLeader {
                replica: b,
                election: Election::Elr,
            },
            BecomeLeader {
                replica: b,
                epoch: 2,
            },
            BecomeFollower {
                replica: a,
                epoch: 2,
            },
            BecomeFollower {
                replica: c,
                epoch: 2,
            },
            FollowerFetch {
                follower: a,
                leader: b,
            },
            FollowerFetch {
                follower: c,
                leader: b,
            },
            LeaderExpandIsr {
                leader: b,
                follower: a,
            },
            Produce {
                leader: b,
                record: 0,
            },
            ControllerElectLeader {
                replica: a,
                election: Election::Clean,
            },
            ControllerElectLeader {
                replica: b,
                election: Election::Clean,
            },
            BecomeLeader {
                replica: b,
                epoch: 4,
            },
            Produce {
                leader: b,
                record: 1,
            },
            FollowerFetch {
                follower: a,
                leader: b,
            },
            FollowerFetch {
                follower: c,
                leader: b,
            },
            FollowerFetch {
                follower: a,
                leader: b,
            },
            LeaderAdvanceHw { leader: b, hw: 2 },
            BecomeLeader {
                replica: a,
                epoch: 3,
            },
            FollowerFetch {
                follower: c,
                leader: b,
            },
            Produce {
                leader: a,
                record: 2,
            },
            BecomeFollower {
                replica: c,
                epoch: 3,
            },
        ],
    );
}

/// A live leader alone in the ISR, fenced by the controller (which believes
/// it failed), is passed over by an unclean election, as Kafka's controller
/// does until the broker heartbeats again; unfenced first, it is elected
/// cleanly. The step driver fences the running broker
/// (`Controller::broker_stopped`) and unfences it
/// (`Controller::broker_unfenced`); the abstraction reads the fence off the
/// controller's registered brokers.
#[test]
fn a_fenced_live_leader_is_passed_over_until_it_is_unfenced() {
    let (a, b, c) = (0, 1, 2);
    let fenced_alone = [
        ControllerElectLeader {
            replica: a,
            election: Election::Clean,
        },
        BecomeLeader {
            replica: a,
            epoch: 0,
        },
        BecomeFollower {
            replica: b,
            epoch: 0,
        },
        BecomeFollower {
            replica: c,
            epoch: 0,
        },
        LeaderShrinkIsr {
            leader: a,
            follower: b,
        },
        LeaderShrinkIsr {
            leader: a,
            follower: c,
        },
        ControllerShrinkIsr { replica: a },
    ];
    let mut passed_over = fenced_alone.to_vec();
    passed_over.push(ControllerElectLeader {
        replica: b,
        election: Election::Unclean,
    });
    replays_in_lockstep("unclean-election", &passed_over);
    let mut unfenced = fenced_alone.to_vec();
    unfenced.extend([
        ControllerUnfence { replica: a },
        ControllerElectLeader {
            replica: a,
            election: Election::Clean,
        },
    ]);
    replays_in_lockstep("unclean-election", &unfenced);
}

/// C's unclean restart moves the controller's partition epoch without
/// changing the ISR (its ELR change), after A's LeaderAndIsr was sent: the
/// step driver gave A the newer epoch's ISR update to see whether it had
/// anything to learn, and A took the newer partition epoch while the step
/// was refused (the exhaustive run of `safe --records 1` found it). The
/// driver now refuses before it gives the update.
#[test]
fn a_refused_leader_learns_isr_leaves_the_leader_as_it_was() {
    let (a, b, c) = (0, 1, 2);
    let p = Preset::find("safe").expect("a preset");
    let path = [
        Crash {
            replica: c,
            clean: false,
        },
        ControllerShrinkIsr { replica: b },
        ControllerShrinkIsr { replica: c },
        ControllerElectLeader {
            replica: a,
            election: Election::Clean,
        },
        Restart { replica: c },
        BecomeFollower {
            replica: b,
            epoch: 0,
        },
        BecomeLeader {
            replica: a,
            epoch: 0,
        },
    ];
    let mut both = Lockstep::in_memory(&p.config).unwrap_or_else(|d| panic!("{d}"));
    for a in path {
        both.step(a).unwrap_or_else(|d| panic!("{a}: {d}"));
    }
    // Compared whole: the partition epoch is not in the model's state.
    let before = both.implementation().clone();
    let mut work = before.clone();
    let refused = work.apply(step_action(LeaderLearnsIsr { leader: a }));
    assert!(refused.is_err(), "A has nothing to learn");
    assert!(work == before, "the refusal changed the implementation");
}
