//! Pictures of a soak run, written as SVG beside its trace (issue 23):
//!
//! - `timeline.svg` ([`timeline`]): a Jepsen-style timeline: records
//!   acknowledged per interval, the acknowledgement latency's p50 and p99
//!   per interval, each fault as a shaded band labelled by its kind and
//!   broker, each acknowledged record lost marked at its acknowledgement,
//!   each event that did not fit the model marked at its time, each
//!   model property broken at a validated step (where the model breaks it
//!   too) at its time;
//! - `partition.svg` ([`partition`]): the partition over time: the
//!   controller's leader (by broker, each election ticked), its epoch, ISR
//!   and ELR membership as a lane per broker, and the leader's HW.
//!
//! Both are drawn from [`data::Run`], which a concurrent run's trace gives
//! ([`data::from_trace_file`]) and a Kafka run's observations give
//! ([`kafka`]): one drawing for both. The SVG names its fonts and leaves text to the viewer: nothing
//! here needs a system font library.

pub mod data;
pub mod kafka;
pub mod partition;
pub mod timeline;

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;

/// The colours the pictures draw with; a test finds the marks by them.
pub mod colour {
    use plotters::style::RGBColor;

    pub const ACKS: RGBColor = RGBColor(70, 130, 180);
    pub const P50: RGBColor = RGBColor(34, 139, 34);
    pub const P99: RGBColor = RGBColor(210, 105, 30);
    pub const LOSS: RGBColor = RGBColor(204, 0, 0);
    pub const VANISHED: RGBColor = RGBColor(255, 140, 0);
    pub const MISFIT: RGBColor = RGBColor(255, 0, 255);
    pub const BROKEN: RGBColor = RGBColor(178, 34, 34);
    pub const ELECTION: RGBColor = RGBColor(148, 0, 211);
    pub const LEADER: RGBColor = RGBColor(25, 25, 112);
    pub const EPOCH: RGBColor = RGBColor(105, 105, 105);
    pub const ISR: RGBColor = RGBColor(46, 139, 87);
    pub const ELR: RGBColor = RGBColor(218, 165, 32);
    pub const HW: RGBColor = RGBColor(0, 0, 139);
    /// A fault band's opacity in the timeline's upper panel (the lower
    /// panel's bands are fainter): one band, one rectangle of it.
    pub const BAND_ALPHA: f64 = 0.18;
}

/// A fault kind's band colour.
pub fn fault_colour(kind: &str) -> RGBColor {
    match kind {
        "crash" | "clean-restart" => RGBColor(255, 165, 0),
        "unclean crash" | "kill-9" | "power-loss" => RGBColor(220, 20, 60),
        "fence" | "pause-long" => RGBColor(106, 90, 205),
        "pause" | "pause-short" => RGBColor(0, 139, 139),
        "stall-kill" | "isolate-kill" => RGBColor(139, 0, 0),
        // Network partitions: from the controller, and between brokers.
        "cut-controller" | "hold-controller" => RGBColor(85, 107, 47),
        "cut-peers" | "hold-peers" | "cut-peers-in" | "cut-peers-out" => RGBColor(30, 144, 255),
        _ => RGBColor(128, 128, 128),
    }
}

/// A colour as the SVG writes it (`#RRGGBB`).
pub fn svg_colour(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// Writes `timeline.svg` and `partition.svg` of `run` into `dir` (created
/// if need be); returns their paths.
pub fn write(dir: &Path, run: &data::Run) -> Result<[PathBuf; 2], String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let timeline = dir.join("timeline.svg");
    let partition = dir.join("partition.svg");
    for (path, svg) in [
        (&timeline, timeline::svg(&run.timeline)?),
        (&partition, partition::svg(&run.partition)?),
    ] {
        std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok([timeline, partition])
}

/// A drawing error, as text.
pub(crate) fn drawing<E: std::fmt::Display>(e: E) -> String {
    format!("drawing failed: {e}")
}

/// Points of a step function through `series` (each value holds until
/// the next), on to `end`.
pub(crate) fn steps<T>(series: &[(f64, T)], end: f64, y: impl Fn(&T) -> f64) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    for (i, (t, v)) in series.iter().enumerate() {
        let next = series.get(i + 1).map_or(end.max(*t), |(n, _)| *n);
        points.push((*t, y(v)));
        points.push((next, y(v)));
    }
    points
}

/// Draws a `highwater-soak` run (its trace at `trace`, validated as `run`
/// says) into `dir`: the acknowledged records it lost and the event that
/// did not fit the model are marked.
pub fn of_validated_run(
    dir: &Path,
    title: &str,
    trace: &Path,
    run: &crate::trace_validation::ValidatedRun,
) -> Result<[PathBuf; 2], String> {
    use crate::trace_validation::MisfitKind;
    let lost: Vec<_> = run
        .report
        .lost_acknowledged()
        .iter()
        .map(|a| a.id)
        .collect();
    let misfits: Vec<u64> = match &run.validation {
        Err(m) if m.kind != MisfitKind::BeyondModel => vec![m.seq],
        _ => Vec::new(),
    };
    let mut data = data::from_trace_file(trace, title, &lost, &misfits)?;
    let pauses = run.report.nemesis_faults.get("Pause").copied().unwrap_or(0);
    if pauses > 0 {
        data.timeline.note = Some(format!(
            "{pauses} follower pause(s) not shown: the trace does not record them"
        ));
    }
    write(dir, &data)
}
