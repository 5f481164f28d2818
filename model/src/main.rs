use highwater_model::*;
use stateright::{Checker, Model};
fn main() {
    let name = std::env::args().nth(1).unwrap_or("safe".into());
    let prop = std::env::args().nth(2);
    let p = Preset::find(&name).unwrap();
    let m = PartitionModel::new(p.config);
    if let Some(prop) = prop {
        let f: fn(&State)->bool = match prop.as_str() {
            "committed" => |s| !properties::records_survive(s, |h| h.visible),
            "strong" => |s| !properties::strong_isr(s),
            "diverge" => |s| !properties::logs_agree_below_hw(s),
            "acked" => |s| !properties::records_survive(s, |h| h.acked),
            _ => panic!(),
        };
        let t = std::time::Instant::now();
        let r = shortest::shortest_traces(&m, &[("x", f)], |st| eprintln!("{st:?} {:?}", t.elapsed()));
        if let Some(tr) = &r[0].1 { println!("{}", render::step_table(tr)); }
        return;
    }
    let t = std::time::Instant::now();
    let c = m.clone().checker().threads(2).symmetry().spawn_dfs().join();
    println!("{name}: states {} unique {} depth {} in {:?}", c.state_count(), c.unique_state_count(), c.max_depth(), t.elapsed());
    for prop in m.properties() {
        println!("  {:?} {}: {}", prop.expectation, prop.name, c.discovery(prop.name).map(|d| format!("found (len {})", d.into_actions().len())).unwrap_or("-".into()));
    }
}
