//! Replay of a model counterexample on the implementation: the shortest path
//! to a state that breaks a property, as the model checker finds it.

use highwater_checker::shortest::shortest_counterexamples;
use highwater_model::properties::properties;
use highwater_model::{Action, Config, PartitionModel};

/// The actions of the shortest path under `cfg` to a state that breaks the
/// always-property `property`; None when the property holds (or is not one).
pub fn shortest_counterexample(cfg: &Config, property: &str) -> Option<Vec<Action>> {
    let targets: Vec<_> = properties()
        .into_iter()
        .filter(|p| p.name == property)
        .collect();
    if targets.is_empty() {
        return None;
    }
    let model = PartitionModel::new(*cfg);
    let (_, trace) = shortest_counterexamples(&model, &targets).pop()?;
    Some(trace?.iter().filter_map(|(_, a)| *a).collect())
}
