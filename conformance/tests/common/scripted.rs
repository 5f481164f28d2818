//! Steps shared by the scripted (steered) lockstep runs.

use highwater_model::controller::Election;
use highwater_model::Action;

/// The controller elects `leader` cleanly, which takes leadership of
/// `epoch`, and each of `followers` follows it.
pub fn leads(leader: u8, epoch: u8, followers: &[u8]) -> Vec<Action> {
    let mut path = vec![
        Action::ControllerElectLeader {
            replica: leader,
            election: Election::Clean,
        },
        Action::BecomeLeader {
            replica: leader,
            epoch,
        },
    ];
    path.extend(
        followers
            .iter()
            .map(|&replica| Action::BecomeFollower { replica, epoch }),
    );
    path
}

/// Unfenced (`unfenced`), A (0) fetches a record of epoch 2 from C (2)
/// while following epoch 0, then leads epoch 1 and appends to it: A's log
/// is a2 b1, its epochs going down.
pub fn epochs_going_down() -> Vec<Action> {
    use Action::*;
    use Election::Clean;
    let (a, b, c) = (0, 1, 2);
    vec![
        Crash {
            replica: b,
            clean: false,
        },
        ControllerElectLeader {
            replica: c,
            election: Clean,
        },
        ControllerElectLeader {
            replica: a,
            election: Clean,
        },
        ControllerElectLeader {
            replica: c,
            election: Clean,
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
    ]
}
