//! A trace held against the model, and a trace's actions re-run under
//! another rule.
//!
//! [`check_trace`] asks whether a trace is a behaviour of the model: it
//! starts in the initial state, and each step is enabled and leads to the
//! state written. When not, [`Mismatch`] says at which step and how: the
//! fields in which the state written differs from the one the step leads
//! to, or, for an action that is not enabled, the enabled actions of its
//! kind.
//!
//! [`rerun`] takes a trace's actions (not its states) from the initial
//! state under other rules, as `highwater replay --under` does and as the
//! tests do to show that a historical failure's fix holds: either a step
//! is refused, or every step runs, and the properties asked about hold at
//! each state reached, or one breaks.

use crate::actions::{self, Action};
use crate::config::Config;
use crate::itf::action_kind;
use crate::model::PartitionModel;
use crate::state::State;
use crate::state_diff::{self, FieldDiff};
use stateright::{Expectation, Model};
use std::fmt;

/// A path: the initial state, then each action and the state it leads to.
pub type Steps = Vec<(State, Option<Action>)>;

/// How a trace is not a behaviour of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// State 0 is not the model's initial state.
    NotInitial { differences: Vec<FieldDiff> },
    /// Step `step`'s action is not enabled in the state before it.
    NotEnabled {
        step: usize,
        action: Action,
        alternatives: Alternatives,
    },
    /// Step `step`'s action is enabled but leads to another state than
    /// the one written (`differences`: the model's value, then the trace's).
    LeadsElsewhere {
        step: usize,
        action: Action,
        differences: Vec<FieldDiff>,
    },
    /// Step `step` names no action, and no enabled action leads to the
    /// state written; `nearest`, the one whose state differs in the fewest
    /// fields (none when nothing is enabled).
    NoActionLeads {
        step: usize,
        nearest: Option<(Action, Vec<FieldDiff>)>,
    },
}

/// What was enabled where an action was not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alternatives {
    /// Enabled actions of the refused action's kind, each with whether it
    /// leads to the state the trace writes next (when the trace writes one).
    pub same_kind: Vec<(Action, bool)>,
    /// Every enabled action.
    pub enabled: Vec<Action>,
}

impl Alternatives {
    fn of(cfg: &Config, s: &State, refused: Action, next: Option<&State>) -> Alternatives {
        let mut enabled = Vec::new();
        actions::enabled(cfg, s, &mut enabled);
        let kind = std::mem::discriminant(&refused);
        let same_kind = enabled
            .iter()
            .filter(|a| std::mem::discriminant(*a) == kind)
            .map(|&a| (a, next == Some(&actions::successor(cfg, s, a))))
            .collect();
        Alternatives { same_kind, enabled }
    }

    /// Lines naming the alternatives to `refused`, taken in state `at`.
    fn text(&self, refused: Action, at: usize) -> String {
        let kind = action_kind(&refused);
        let list = |actions: &mut dyn Iterator<Item = String>| {
            actions.map(|a| format!("\n    {a}")).collect::<String>()
        };
        if !self.same_kind.is_empty() {
            let mut lines = self.same_kind.iter().map(|(a, leads)| {
                if *leads {
                    format!("{a}   <- leads to state {} as written", at + 1)
                } else {
                    a.to_string()
                }
            });
            format!("enabled there of kind {kind}:{}", list(&mut lines))
        } else if self.enabled.is_empty() {
            "nothing is enabled there".to_string()
        } else {
            let mut lines = self.enabled.iter().map(|a| a.to_string());
            format!("no {kind} is enabled there; enabled:{}", list(&mut lines))
        }
    }
}

const MODEL: &str = "the step gives";
const WRITTEN: &str = "the trace writes";

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::NotInitial { differences } => write!(
                f,
                "state 0 is not the model's initial state:\n{}",
                state_diff::table(differences, "the model's", "the trace's")
            ),
            Mismatch::NotEnabled {
                step,
                action,
                alternatives,
            } => write!(
                f,
                "step {step}: {action} is not enabled in state {}; {}",
                step - 1,
                alternatives.text(*action, step - 1)
            ),
            Mismatch::LeadsElsewhere {
                step,
                action,
                differences,
            } => write!(
                f,
                "step {step}: {action} does not lead to state {step} as written:\n{}",
                state_diff::table(differences, MODEL, WRITTEN)
            ),
            Mismatch::NoActionLeads { step, nearest } => {
                write!(
                    f,
                    "step {step}: the trace names no action, and no enabled action leads to \
                     state {step} as written"
                )?;
                match nearest {
                    Some((a, d)) => write!(
                        f,
                        "; the nearest, {a}, differs in:\n{}",
                        state_diff::table(d, MODEL, WRITTEN)
                    ),
                    None => write!(f, "; nothing is enabled in state {}", step - 1),
                }
            }
        }
    }
}

/// Checks that `states` start in the model's initial state under `cfg` and
/// that each step is enabled and leads to the next state; `actions[i]`, when
/// given, is the action of step `i` (the first is the initial state's, and
/// is ignored). Returns the steps, with the actions found where none was
/// given.
pub fn check_trace(
    cfg: &Config,
    states: &[State],
    actions: &[Option<Action>],
) -> Result<Steps, Mismatch> {
    let init = PartitionModel::new(*cfg).init_state();
    let Some(first) = states.first() else {
        return Ok(Vec::new());
    };
    if *first != init {
        return Err(Mismatch::NotInitial {
            differences: state_diff::diff(&init, first),
        });
    }
    let mut steps = vec![(*first, None)];
    for (i, w) in states.windows(2).enumerate() {
        let (prev, next) = (&w[0], &w[1]);
        let step = i + 1;
        let mut enabled = Vec::new();
        actions::enabled(cfg, prev, &mut enabled);
        let action = match actions.get(step).copied().flatten() {
            Some(a) if !enabled.contains(&a) => {
                return Err(Mismatch::NotEnabled {
                    step,
                    action: a,
                    alternatives: Alternatives::of(cfg, prev, a, Some(next)),
                });
            }
            Some(a) => {
                let got = actions::successor(cfg, prev, a);
                if got != *next {
                    return Err(Mismatch::LeadsElsewhere {
                        step,
                        action: a,
                        differences: state_diff::diff(&got, next),
                    });
                }
                a
            }
            None => {
                let leads = |a: &&Action| actions::successor(cfg, prev, **a) == *next;
                match enabled.iter().find(leads) {
                    Some(&a) => a,
                    None => {
                        let nearest = enabled
                            .iter()
                            .map(|&a| {
                                (a, state_diff::diff(&actions::successor(cfg, prev, a), next))
                            })
                            .min_by_key(|(_, d)| d.len());
                        return Err(Mismatch::NoActionLeads { step, nearest });
                    }
                }
            }
        };
        steps.push((*next, Some(action)));
    }
    Ok(steps)
}

/// How a re-run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every action ran and every property asked about held in every state.
    Holds,
    /// `step`'s action is not enabled under these rules; every property
    /// asked about held up to it. `alternatives`: what was enabled there.
    Refused {
        step: usize,
        action: Action,
        alternatives: Alternatives,
    },
    /// `property` breaks in state `step` (the first that breaks one; the
    /// re-run stops there).
    Breaks { step: usize, property: &'static str },
}

/// A trace's actions re-run under a configuration.
#[derive(Clone, Debug)]
pub struct Rerun {
    pub config: Config,
    /// What ran: the initial state, then each action taken and its state.
    pub steps: Steps,
    /// How many actions were asked for.
    pub actions: usize,
    /// The always-properties checked in every state.
    pub properties: Vec<&'static str>,
    pub outcome: Outcome,
}

impl Rerun {
    /// Whether a property still breaks (what a fix must prevent).
    pub fn breaks(&self) -> bool {
        matches!(self.outcome, Outcome::Breaks { .. })
    }

    /// The outcome in one sentence.
    pub fn verdict(&self) -> String {
        let held = match self.properties.as_slice() {
            [] => String::new(),
            [one] => format!(", and \"{one}\" holds"),
            _ => ", and every always-property holds".to_string(),
        };
        match &self.outcome {
            Outcome::Holds => format!(
                "every step runs ({} of {}){held} in every state",
                self.actions, self.actions
            ),
            Outcome::Refused { step, action, .. } => {
                format!("step {step} ({action}) is refused{held} up to it")
            }
            Outcome::Breaks { step, property } => {
                let at = if *step == self.actions {
                    "the last step".to_string()
                } else {
                    format!("step {step} of {}", self.actions)
                };
                format!("\"{property}\" still breaks, at {at}")
            }
        }
    }
}

/// Re-runs `actions` from the initial state under `cfg`, checking the
/// always-properties named in `properties` in every state reached (the
/// initial one too); stops at the first refused action or broken property.
pub fn rerun(cfg: &Config, actions: &[Action], properties: &[&str]) -> Result<Rerun, String> {
    let model = PartitionModel::new(*cfg);
    let all = model.properties();
    let checked = properties
        .iter()
        .map(|&name| {
            all.iter()
                .find(|p| p.name == name && p.expectation == Expectation::Always)
                .ok_or_else(|| format!("{name:?} is not an always-property of the model"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let broken = |s: &State| {
        checked
            .iter()
            .find(|p| !(p.condition)(&model, s))
            .map(|p| p.name)
    };
    let mut s = model.init_state();
    let mut run = Rerun {
        config: *cfg,
        steps: vec![(s, None)],
        actions: actions.len(),
        properties: checked.iter().map(|p| p.name).collect(),
        outcome: Outcome::Holds,
    };
    if let Some(property) = broken(&s) {
        run.outcome = Outcome::Breaks { step: 0, property };
        return Ok(run);
    }
    for (i, &action) in actions.iter().enumerate() {
        let step = i + 1;
        let mut enabled = Vec::new();
        actions::enabled(cfg, &s, &mut enabled);
        if !enabled.contains(&action) {
            run.outcome = Outcome::Refused {
                step,
                action,
                alternatives: Alternatives::of(cfg, &s, action, None),
            };
            return Ok(run);
        }
        s = actions::successor(cfg, &s, action);
        run.steps.push((s, Some(action)));
        if let Some(property) = broken(&s) {
            run.outcome = Outcome::Breaks { step, property };
            return Ok(run);
        }
    }
    Ok(run)
}

impl Outcome {
    /// For a refused step, the lines naming what was enabled instead.
    pub fn alternatives_text(&self) -> Option<String> {
        match self {
            Outcome::Refused {
                step,
                action,
                alternatives,
            } => Some(alternatives.text(*action, step - 1)),
            _ => None,
        }
    }
}

/// `bounds`' bounds (replicas, records, epochs, crashes, leader moves)
/// with `rules`' rules (everything else): what a trace re-run under
/// another rule is checked with.
pub fn with_rules(bounds: &Config, rules: &Config) -> Config {
    // Every field named, so that a new one must be placed on one side.
    Config {
        replicas: bounds.replicas,
        records: bounds.records,
        max_epoch: bounds.max_epoch,
        clean_crashes: bounds.clean_crashes,
        unclean_crashes: bounds.unclean_crashes,
        leader_moves: bounds.leader_moves,
        min_isr: rules.min_isr,
        acks: rules.acks,
        truncation: rules.truncation,
        fencing: rules.fencing,
        elr: rules.elr,
        last_known_leader: rules.last_known_leader,
        unclean_election: rules.unclean_election,
        hw_checkpoint: rules.hw_checkpoint,
        mutation: rules.mutation,
        knock_out: rules.knock_out,
    }
}

/// One setting that differs between two configurations, named as its flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub name: &'static str,
    pub from: String,
    pub to: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> {}", self.name, self.from, self.to)
    }
}

type Setting = (&'static str, fn(&Config) -> String);

const RULES: [Setting; 10] = [
    ("acks", |c| c.acks.to_string()),
    ("min-isr", |c| c.min_isr.to_string()),
    ("truncation", |c| c.truncation.to_string()),
    ("fencing", |c| crate::config::on_off(c.fencing).to_string()),
    ("elr", |c| crate::config::on_off(c.elr).to_string()),
    ("last-known-leader", |c| {
        crate::config::on_off(c.last_known_leader).to_string()
    }),
    ("unclean-election", |c| {
        crate::config::on_off(c.unclean_election).to_string()
    }),
    ("hw-checkpoint", |c| c.hw_checkpoint.to_string()),
    ("mutation", |c| {
        c.mutation.map_or("none".to_string(), |m| m.to_string())
    }),
    ("knock-out", |c| {
        c.knock_out.map_or("none".to_string(), |r| r.to_string())
    }),
];

const BOUNDS: [Setting; 6] = [
    ("replicas", |c| c.replicas.to_string()),
    ("records", |c| c.records.to_string()),
    ("max-epoch", |c| c.max_epoch.to_string()),
    ("clean-crashes", |c| c.clean_crashes.to_string()),
    ("unclean-crashes", |c| c.unclean_crashes.to_string()),
    ("leader-moves", |c| c.leader_moves.to_string()),
];

fn changes(settings: &[Setting], a: &Config, b: &Config) -> Vec<Change> {
    settings
        .iter()
        .filter(|(_, get)| get(a) != get(b))
        .map(|&(name, get)| Change {
            name,
            from: get(a),
            to: get(b),
        })
        .collect()
}

/// The rules in which `b` differs from `a` (bounds aside).
pub fn rule_changes(a: &Config, b: &Config) -> Vec<Change> {
    changes(&RULES, a, b)
}

/// The bounds in which `b` differs from `a` (rules aside).
pub fn bound_changes(a: &Config, b: &Config) -> Vec<Change> {
    changes(&BOUNDS, a, b)
}
