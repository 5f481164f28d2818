//! `timeline.svg`: records acknowledged per interval (bars) over fault
//! bands, losses, misfits and broken properties marked; below, the
//! acknowledgement latency's p50 and p99 per interval.

use plotters::prelude::*;

use super::colour::{self, BAND_ALPHA};
use super::data::Timeline;
use super::{drawing, fault_colour};

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 720;

/// The interval acknowledgements are counted in: the smallest round one
/// that cuts `end` into at most 100.
pub fn interval(end: f64) -> f64 {
    const ROUND: [f64; 14] = [
        0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
    ];
    ROUND
        .into_iter()
        .find(|w| end / w <= 100.0)
        .unwrap_or(end / 100.0)
}

/// Per interval: its start, the records acknowledged, and the latencies
/// (ms) of its acknowledgements, sorted.
fn buckets(t: &Timeline, width: f64) -> Vec<(f64, u64, Vec<f64>)> {
    let n = (t.end / width).ceil().max(1.0) as usize;
    let mut b: Vec<(f64, u64, Vec<f64>)> =
        (0..n).map(|i| (i as f64 * width, 0, Vec::new())).collect();
    for a in &t.acks {
        let i = ((a.at / width) as usize).min(n - 1);
        b[i].1 += a.records;
        if let Some(l) = a.latency_ms {
            b[i].2.push(l);
        }
    }
    for (_, _, l) in &mut b {
        l.sort_by(f64::total_cmp);
    }
    b
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    Some(sorted[((p / 100.0) * last as f64).round() as usize])
}

/// The picture, as SVG text.
pub fn svg(t: &Timeline) -> Result<String, String> {
    let end = t
        .end
        .max(t.faults.iter().map(|f| f.end).fold(0.0, f64::max))
        .max(t.acks.iter().map(|a| a.at).fold(0.0, f64::max))
        .max(0.001);
    let t = Timeline { end, ..t.clone() };
    let width = interval(end);
    let buckets = buckets(&t, width);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let root = root.titled(&t.title, ("sans-serif", 20)).map_err(drawing)?;
        let root = match &t.note {
            Some(note) => root.titled(note, ("sans-serif", 13)).map_err(drawing)?,
            None => root,
        };
        let (upper, lower) = root.split_vertically(HEIGHT * 11 / 20);
        let most = buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64 * 1.25;
        let mut chart = ChartBuilder::on(&upper)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end, 0.0..most)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("seconds since the run began")
            .y_label_formatter(&|y: &f64| format!("{y:.0}"))
            .y_desc(format!("records acknowledged per {width} s"))
            .draw()
            .map_err(drawing)?;
        // One band per fault, its label staggered by broker.
        chart
            .draw_series(t.faults.iter().map(|f| {
                Rectangle::new(
                    [(f.start, 0.0), (f.end.max(f.start), most)],
                    fault_colour(&f.kind).mix(BAND_ALPHA).filled(),
                )
            }))
            .map_err(drawing)?;
        chart
            .draw_series(t.faults.iter().map(|f| {
                let row = f.broker.unwrap_or(0) % 4;
                let label = match f.broker {
                    Some(b) => format!("{} {b}", f.kind),
                    None => f.kind.clone(),
                };
                Text::new(
                    label,
                    (f.start, most * (0.99 - 0.05 * f64::from(row))),
                    ("sans-serif", 11).into_font().color(&fault_colour(&f.kind)),
                )
            }))
            .map_err(drawing)?;
        chart
            .draw_series(buckets.iter().filter(|b| b.1 > 0).map(|b| {
                Rectangle::new(
                    [(b.0 + width * 0.1, 0.0), (b.0 + width * 0.9, b.1 as f64)],
                    colour::ACKS.filled(),
                )
            }))
            .map_err(drawing)?;
        // One mark per thousandth of the run that lost records (or read
        // records that then vanished, lower down): thousands of them draw
        // as their spans, not as thousands of circles.
        for (marks, height, colour) in [
            (&t.losses, 0.75, colour::LOSS),
            (&t.vanished, 0.65, colour::VANISHED),
        ] {
            let mut at: Vec<i64> = marks
                .iter()
                .map(|l| (l.at / end * 1000.0).round() as i64)
                .collect();
            at.dedup();
            chart
                .draw_series(at.into_iter().map(|x| {
                    Circle::new((x as f64 * end / 1000.0, most * height), 4, colour.filled())
                }))
                .map_err(drawing)?;
        }
        chart
            .draw_series(t.misfits.iter().map(|m| {
                PathElement::new(
                    vec![(m.at, 0.0), (m.at, most)],
                    colour::MISFIT.stroke_width(2),
                )
            }))
            .map_err(drawing)?;
        chart
            .draw_series(t.broken.iter().map(|m| {
                PathElement::new(
                    vec![(m.at, 0.0), (m.at, most)],
                    colour::BROKEN.stroke_width(2),
                )
            }))
            .map_err(drawing)?;
        let mut notes = Vec::new();
        if !t.losses.is_empty() {
            notes.push((
                format!(
                    "● {} acknowledged record(s) lost, at their ack",
                    t.losses.len()
                ),
                colour::LOSS,
            ));
        }
        if !t.vanished.is_empty() {
            notes.push((
                format!(
                    "● {} record(s) read, then gone from the log, at their read",
                    t.vanished.len()
                ),
                colour::VANISHED,
            ));
        }
        for m in t.misfits.iter().take(3) {
            notes.push((format!("| misfit: {}", m.label), colour::MISFIT));
        }
        for m in t.broken.iter().take(3) {
            notes.push((format!("| broken: {}", m.label), colour::BROKEN));
        }
        if t.acks.is_empty() {
            notes.push(("no write was acknowledged".to_string(), BLACK));
        }
        for (i, (n, c)) in notes.into_iter().enumerate() {
            upper
                .draw_text(
                    &n,
                    &("sans-serif", 13).into_font().color(&c),
                    (90, 20 + 16 * i as i32),
                )
                .map_err(drawing)?;
        }

        let slowest = buckets
            .iter()
            .filter_map(|b| percentile(&b.2, 99.0))
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.1;
        let mut chart = ChartBuilder::on(&lower)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end, 0.0..slowest)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .x_desc("seconds since the run began")
            .y_desc("ack latency (ms)")
            .draw()
            .map_err(drawing)?;
        chart
            .draw_series(t.faults.iter().map(|f| {
                Rectangle::new(
                    [(f.start, 0.0), (f.end.max(f.start), slowest)],
                    fault_colour(&f.kind).mix(BAND_ALPHA / 2.0).filled(),
                )
            }))
            .map_err(drawing)?;
        for (p, c) in [(50.0, colour::P50), (99.0, colour::P99)] {
            let points: Vec<(f64, f64)> = buckets
                .iter()
                .filter_map(|b| Some((b.0 + width / 2.0, percentile(&b.2, p)?)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))
                .map_err(drawing)?
                .label(format!("p{p}"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        if t.acks.iter().all(|a| a.latency_ms.is_none()) {
            lower
                .draw_text(
                    "no latency measured (every answer was given at the leader's append: acks=1)",
                    &("sans-serif", 13).into_font().color(&BLACK),
                    (90, 20),
                )
                .map_err(drawing)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}
