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
