//! The progress check on a job that is retried after crashes, a model
//! small enough to count its states by hand: what it calls stuck, what it
//! counts as exempt, why recovery beyond the bounds is needed, and the
//! trap and lasso it reports for a job that can never finish.

use highwater_checker::lasso::progress_lasso;
use highwater_checker::progress::{self, ProgressReport};
use highwater_checker::recovery_walk::RecoveryWalk;
use highwater_checker::search::{ProgressOptions, Until};
use highwater_checker::{Checkable, Goal, Verdict};
use serde::{Deserialize, Serialize};
use stateright::Model;

mod common;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Phase {
    Idle,
    Running,
    Failed,
    /// Spinning between this and `Failed` (the `SpinAfterTwo` flaw).
    Waiting,
    Done,
    /// Its input is gone: only an operator can help.
    Lost,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Job {
    attempts: u8,
    phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Start,
    Finish,
    Crash,
    Lose,
    Retry,
    Poll,
}

/// How retrying goes wrong after two attempts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flaw {
    None,
    /// No retry: a failed job stays failed.
    GiveUpAfterTwo,
    /// A retry waits, and waiting fails again: forever.
    SpinAfterTwo,
}

#[derive(Clone, Debug)]
struct Retries {
    max_attempts: u8,
    flaw: Flaw,
}

const FINISHES: &str = "the job finishes";

impl Model for Retries {
    type State = Job;
    type Action = Step;

    fn init_states(&self) -> Vec<Job> {
        vec![Job {
            attempts: 0,
            phase: Phase::Idle,
        }]
    }

    fn actions(&self, s: &Job, actions: &mut Vec<Step>) {
        match s.phase {
            Phase::Idle if s.attempts < self.max_attempts => actions.push(Step::Start),
            Phase::Running => actions.extend([Step::Finish, Step::Crash, Step::Lose]),
            Phase::Failed if self.flaw != Flaw::GiveUpAfterTwo || s.attempts < 2 => {
                actions.push(Step::Retry)
            }
            Phase::Waiting => actions.push(Step::Poll),
            _ => {}
        }
    }

    fn next_state(&self, s: &Job, a: Step) -> Option<Job> {
        let phase = match a {
            Step::Start => Phase::Running,
            Step::Finish => Phase::Done,
            Step::Crash | Step::Poll => Phase::Failed,
            Step::Lose => Phase::Lost,
            Step::Retry if self.flaw == Flaw::SpinAfterTwo && s.attempts >= 2 => Phase::Waiting,
            Step::Retry => Phase::Idle,
        };
        let attempts = s.attempts + u8::from(a == Step::Start);
        Some(Job { attempts, phase })
    }
}

impl Checkable for Retries {
    fn is_fault(&self, _: &Job, a: &Step) -> bool {
        matches!(a, Step::Crash | Step::Lose)
    }

    fn within_bounds(&self, s: &Job) -> bool {
        s.attempts <= self.max_attempts
    }

    /// One more attempt: a job that failed its last one may still finish.
    fn recovery_model(&self) -> Self {
        Retries {
            max_attempts: self.max_attempts + 1,
            ..*self
        }
    }

    fn progress_goals(&self) -> Vec<Goal<Self>> {
        vec![Goal {
            name: FINISHES,
            condition: |_, s| s.phase == Phase::Done,
        }]
    }

    fn exempt(&self, s: &Job) -> bool {
        s.phase == Phase::Lost
    }
}

fn check_with(model: &Retries, opts: ProgressOptions<Retries>) -> ProgressReport<Retries> {
    progress::check(&common::search_whole(model, 2, Some(opts)))
}

fn check(model: &Retries) -> ProgressReport<Retries> {
    check_with(model, ProgressOptions::of(model))
}

fn retries(flaw: Flaw) -> Retries {
    Retries {
        max_attempts: 3,
        flaw,
    }
}

fn phases(trace: &[(Job, Option<Step>)]) -> Vec<(u8, Phase)> {
    trace.iter().map(|(s, _)| (s.attempts, s.phase)).collect()
}

#[test]
fn a_job_that_can_always_be_retried_can_always_finish() {
    let report = check(&retries(Flaw::None));
    let p = &report.properties[0];
    assert_eq!((p.name, p.verdict()), (FINISHES, Verdict::Holds));
    // A lost job cannot finish, but waits for an operator by design: one
    // per attempt that lost it.
    assert_eq!(p.exempt_states, 3);
    let example = report.exempt_example.expect("a job can be lost");
    assert_eq!(
        phases(&example),
        [(0, Phase::Idle), (1, Phase::Running), (1, Phase::Lost)]
    );
    // Retrying the last attempt leads beyond the bound, where one walk
    // (start, finish) shows the job finishes.
    assert_eq!(report.recovery_states, 1);
    assert_eq!(report.recovery_walked, 1);
}

#[test]
fn without_recovery_the_last_attempt_looks_like_a_stall() {
    let model = retries(Flaw::None);
    let report = check_with(
        &model,
        ProgressOptions {
            recovery: model.clone(),
            ..ProgressOptions::of(&model)
        },
    );
    let p = &report.properties[0];
    // Failed and idle again after the last attempt.
    assert_eq!(p.stuck_states, 2);
    let stuck = p.counterexample.as_ref().expect("a stuck state");
    assert_eq!(stuck.trace.last().unwrap().0.attempts, 3);
    assert_eq!(report.recovery_states, 0);
}

#[test]
fn walking_or_expanding_recovery_states_gives_the_same_verdicts() {
    for flaw in [Flaw::None, Flaw::GiveUpAfterTwo, Flaw::SpinAfterTwo] {
        let model = retries(flaw);
        let stuck = |walk| {
            let report = check_with(
                &model,
                ProgressOptions {
                    walk,
                    ..ProgressOptions::of(&model)
                },
            );
            (report.properties[0].stuck_states, report.recovery_walked)
        };
        let (walked, shown) = stuck(RecoveryWalk::Greedy);
        let (expanded, none) = stuck(RecoveryWalk::Off);
        assert_eq!(walked, expanded, "{flaw:?}");
        assert_eq!(none, 0);
        assert!(flaw != Flaw::None || shown == 1);
    }
}

#[test]
fn a_job_that_gives_up_is_stuck_where_it_failed() {
    let model = retries(Flaw::GiveUpAfterTwo);
    let report = check(&model);
    let p = &report.properties[0];
    assert_eq!(p.verdict(), Verdict::Counterexample);
    // Failed after the second attempt (there is no third).
    assert_eq!(p.stuck_states, 1);
    let stuck = p.counterexample.as_ref().unwrap();
    assert_eq!(
        phases(&stuck.trace),
        [
            (0, Phase::Idle),
            (1, Phase::Running),
            (1, Phase::Failed),
            (1, Phase::Idle),
            (2, Phase::Running),
            (2, Phase::Failed)
        ]
    );
    // Nothing to do but wait: the trap is the state itself, and the lasso
    // stutters there.
    assert!(stuck.exits.is_empty());
    assert_eq!(stuck.trap_states, 1);
    assert_eq!(stuck.continuation.len(), 1);
    let (lasso, at) = progress_lasso(
        &model,
        &model.recovery_model(),
        &stuck.trace,
        &stuck.continuation,
    );
    assert_eq!(lasso.len(), 6);
    assert_eq!(at, 5);
}

#[test]
fn a_job_that_spins_is_caught_in_a_loop_of_two_states() {
    let model = retries(Flaw::SpinAfterTwo);
    let report = check(&model);
    let p = &report.properties[0];
    // Failed and waiting after the second attempt (there is no third).
    assert_eq!(p.stuck_states, 2);
    let stuck = p.counterexample.as_ref().unwrap();
    assert_eq!(stuck.trace.last().unwrap().0.phase, Phase::Failed);
    let waiting = Job {
        attempts: 2,
        phase: Phase::Waiting,
    };
    assert_eq!(stuck.exits, [(Step::Retry, waiting)]);
    assert_eq!(stuck.trap_states, 2);
    // The lasso goes round: retry, poll, and back to the failed state.
    let (lasso, at) = progress_lasso(
        &model,
        &model.recovery_model(),
        &stuck.trace,
        &stuck.continuation,
    );
    assert_eq!(at, 5);
    assert_eq!(
        phases(&lasso[5..]),
        [(2, Phase::Failed), (2, Phase::Waiting)]
    );
    let last = lasso.last().unwrap().0;
    assert_eq!(model.next_state(&last, Step::Poll), Some(lasso[at].0));
}

/// The distributed engine (`src/distributed/`) agrees with this one on
/// every figure of the progress check: recovery beyond the bounds, walked
/// recovery states, stuck and exempt counts, the stuck state, its exits,
/// trap and continuation, on 1, 2 and 3 workers.
#[test]
fn the_distributed_check_finds_what_one_process_finds() {
    use highwater_checker::distributed::Flaw as Planted;
    for flaw in [Flaw::None, Flaw::GiveUpAfterTwo, Flaw::SpinAfterTwo] {
        let model = retries(flaw);
        let want = common::describe(&common::single(&model, true, Until::Exhausted));
        for workers in 1..=3 {
            let got = common::describe(&common::spread(
                &model,
                true,
                Until::Exhausted,
                workers,
                Planted::None,
            ));
            assert_eq!(got, want, "{flaw:?} on {workers} worker(s)");
        }
    }
}

/// The comparison above notices edges lost by the distributed progress
/// check: the planted flaw drops the last edge of every round (slices of
/// 3 edges here), and states that reach their goal only through a lost
/// edge are counted stuck.
#[test]
fn the_comparison_catches_edges_lost_at_slice_ends() {
    use highwater_checker::distributed::Flaw as Planted;
    let model = retries(Flaw::None);
    let want = common::describe(&common::single(&model, true, Until::Exhausted));
    let got = common::describe(&common::spread(
        &model,
        true,
        Until::Exhausted,
        2,
        Planted::DropSliceEnds,
    ));
    assert_ne!(got, want, "edges dropped at slice ends went unnoticed");
}
