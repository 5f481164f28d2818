//! Lockstep: the model chooses an enabled action, the model and the
//! implementation's step driver both take it, and the implementation's state,
//! seen through the abstraction function, must equal the model's after every
//! step.

use crate::abstraction::{abstract_state, comparable};
use crate::mapping::{step_action, step_config};
use highwater::cluster::StepCluster;
use highwater_model::actions::{apply, enabled};
use highwater_model::render::state_table;
use highwater_model::{Action, Config, PartitionModel, State};
use std::fmt;
use std::path::Path;

/// Where the implementation stopped behaving as the model.
#[derive(Debug)]
pub struct Divergence {
    /// The actions taken, the last one being where they parted.
    pub steps: Vec<Action>,
    pub what: String,
    /// The model's state after the last step (boxed: states are large).
    pub model: Box<State>,
    /// The implementation's, when it could be abstracted.
    pub implementation: Option<Box<State>>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "after {} step(s): {}", self.steps.len(), self.what)?;
        for (i, a) in self.steps.iter().enumerate() {
            writeln!(f, "  step {}: {a}", i + 1)?;
        }
        writeln!(f, "model:\n{}", state_table(&self.model))?;
        match &self.implementation {
            Some(s) => write!(f, "implementation:\n{}", state_table(s)),
            None => write!(f, "implementation: (no model state)"),
        }
    }
}

/// The model and the implementation side by side, equal so far.
pub struct Lockstep {
    cfg: Config,
    model: State,
    imp: StepCluster,
    steps: Vec<Action>,
}

impl Lockstep {
    /// Both in their initial states; the implementation keeps its files
    /// under `dir`.
    pub fn start(cfg: &Config, dir: &Path) -> Result<Lockstep, Divergence> {
        let model = PartitionModel::new(*cfg).init_state();
        let imp = StepCluster::new(dir, step_config(cfg)).map_err(|e| Divergence {
            steps: Vec::new(),
            what: format!("the cluster did not start: {e}"),
            model: Box::new(model),
            implementation: None,
        })?;
        let both = Lockstep {
            cfg: *cfg,
            model,
            imp,
            steps: Vec::new(),
        };
        both.compare()?;
        Ok(both)
    }

    /// The actions the model enables now, in its order.
    pub fn enabled(&self) -> Vec<Action> {
        let mut out = Vec::new();
        enabled(&self.cfg, &self.model, &mut out);
        out
    }

    /// Both take `action`, which the model must enable; then their states
    /// must agree.
    pub fn step(&mut self, action: Action) -> Result<(), Divergence> {
        self.steps.push(action);
        let Some(next) = self
            .enabled()
            .contains(&action)
            .then(|| apply(&self.cfg, &self.model, action))
            .flatten()
        else {
            return Err(self.diverged(None, format!("the model does not enable {action}")));
        };
        self.model = next;
        if let Err(e) = self.imp.apply(step_action(action)) {
            let what = format!("the implementation refused {action}: {e}");
            return Err(self.diverged(None, what));
        }
        self.compare()
    }

    pub fn model(&self) -> &State {
        &self.model
    }
    pub fn implementation(&self) -> &StepCluster {
        &self.imp
    }
    pub fn steps(&self) -> &[Action] {
        &self.steps
    }

    fn diverged(&self, implementation: Option<State>, what: String) -> Divergence {
        Divergence {
            steps: self.steps.clone(),
            what,
            model: Box::new(self.model),
            implementation: implementation.map(Box::new),
        }
    }

    /// The implementation's state, abstracted, against the model's.
    fn compare(&self) -> Result<(), Divergence> {
        let snap = self
            .imp
            .snapshot()
            .map_err(|e| self.diverged(None, format!("no snapshot: {e}")))?;
        let seen = abstract_state(&self.cfg, &snap)
            .map_err(|e| self.diverged(None, format!("no model state: {e}")))?;
        let (model, imp) = (comparable(&self.model), comparable(&seen));
        if model == imp {
            return Ok(());
        }
        let what = format!("states differ: {}", differences(&model, &imp).join("; "));
        Err(self.diverged(Some(seen), what))
    }
}

/// Runs both from their initial states, choosing at step `i` the enabled
/// action `choices[i] % count` (the model's order), until the choices run out
/// or nothing is enabled. Returns the actions taken.
pub fn run(cfg: &Config, choices: &[u16], dir: &Path) -> Result<Vec<Action>, Divergence> {
    let mut both = Lockstep::start(cfg, dir)?;
    for &choice in choices {
        let actions = both.enabled();
        if actions.is_empty() {
            break;
        }
        both.step(actions[usize::from(choice) % actions.len()])?;
    }
    Ok(both.steps)
}

/// Runs `actions` (a model path, such as a counterexample) on both; returns
/// them side by side after the last.
pub fn replay(cfg: &Config, actions: &[Action], dir: &Path) -> Result<Lockstep, Divergence> {
    let mut both = Lockstep::start(cfg, dir)?;
    for &a in actions {
        both.step(a)?;
    }
    Ok(both)
}

/// Which parts of two states differ, named as the model names them.
pub fn differences(model: &State, imp: &State) -> Vec<String> {
    let mut out = Vec::new();
    for r in model.ids() {
        let (m, i) = (model.replica(r), imp.replica(r));
        let name = highwater_model::state::replica_name(r);
        let mut field = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{name}.{what}: model {a}, implementation {b}"));
            }
        };
        field("alive", format!("{}", m.alive), format!("{}", i.alive));
        field("log", format!("{:?}", m.log), format!("{:?}", i.log));
        field("hw", format!("{}", m.hw), format!("{}", i.hw));
        field(
            "recovery_point",
            format!("{}", m.recovery_point),
            format!("{}", i.recovery_point),
        );
        field("epoch", format!("{:?}", m.epoch), format!("{:?}", i.epoch));
        field(
            "leader",
            format!("{:?}", m.leader),
            format!("{:?}", i.leader),
        );
        field("isr", format!("{:?}", m.isr), format!("{:?}", i.isr));
        field(
            "follower_leo",
            format!("{:?}", &m.follower_leo[..model.n as usize]),
            format!("{:?}", &i.follower_leo[..model.n as usize]),
        );
        field(
            "stale_fetch",
            format!("{:?}", m.stale_fetch),
            format!("{:?}", i.stale_fetch),
        );
        field(
            "pending_acks",
            format!("{:#b}", m.pending_acks),
            format!("{:#b}", i.pending_acks),
        );
        field(
            "unclean_down",
            format!("{}", m.unclean_down),
            format!("{}", i.unclean_down),
        );
    }
    let mut field = |what: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{what}: model {a}, implementation {b}"));
        }
    };
    field(
        "controller",
        format!("{:?}", model.controller),
        format!("{:?}", imp.controller),
    );
    field(
        "requests",
        format!("{:?}", model.requests),
        format!("{:?}", imp.requests),
    );
    field(
        "records",
        format!("{:?}", &model.records[..model.produced as usize]),
        format!("{:?}", &imp.records[..imp.produced as usize]),
    );
    field(
        "crashes (clean, unclean)",
        format!("{:?}", (model.clean_crashes, model.unclean_crashes)),
        format!("{:?}", (imp.clean_crashes, imp.unclean_crashes)),
    );
    field(
        "leader moves",
        format!("{}", model.leader_moves),
        format!("{}", imp.leader_moves),
    );
    out
}
