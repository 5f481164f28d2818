//! `partition.svg`: the partition over time: the controller's leader by
//! broker (each election ticked), its leader epoch, ISR and ELR
//! membership as a lane per broker, and the leader's HW (its last value
//! written at its end).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::colour;
use super::data::Partition;
use super::{drawing, steps};

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 820;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// For each broker, the intervals in which `series` holds it.
fn membership(series: &[(f64, Vec<u32>)], broker: u32, end: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, (t, members)) in series.iter().enumerate() {
        if members.contains(&broker) {
            let next = series.get(i + 1).map_or(end.max(*t), |(n, _)| *n);
            out.push((*t, next));
        }
    }
    out
}

/// The picture, as SVG text.
pub fn svg(p: &Partition) -> Result<String, String> {
    let end = p
        .end
        .max(p.hw.last().map_or(0.0, |h| h.0))
        .max(p.leader.last().map_or(0.0, |l| l.0))
        .max(0.001);
    let mut brokers = p.brokers.clone();
    for (_, l) in &p.leader {
        brokers.extend(*l);
    }
    for (_, s) in p.isr.iter().chain(&p.elr) {
        brokers.extend(s);
    }
    brokers.sort_unstable();
    brokers.dedup();
    let lane = |b: u32| brokers.iter().position(|&x| x == b).unwrap_or(0) as f64;
    let n = brokers.len().max(1) as f64;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let root = root.titled(&p.title, ("sans-serif", 20)).map_err(drawing)?;
        let root = match &p.note {
            Some(note) => root.titled(note, ("sans-serif", 13)).map_err(drawing)?,
            None => root,
        };
        let (leader_area, rest) = root.split_vertically(170);
        let (epoch_area, rest) = rest.split_vertically(130);
        let (lanes_area, hw_area) = rest.split_vertically(60 + 60 * brokers.len().max(1) as u32);

        // The leader, by broker (-1: none), each election ticked.
        let names = brokers.clone();
        let broker_name = move |y: &f64| {
            let i = y.round();
            if (y - i).abs() > 0.01 {
                String::new()
            } else if i < 0.0 {
                "none".to_string()
            } else {
                names
                    .get(i as usize)
                    .map_or(String::new(), |b| format!("broker {b}"))
            }
        };
        let mut chart = chart_on(&leader_area, end, -1.5..n - 0.5, 80)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .y_labels(brokers.len() + 2)
            .y_label_formatter(&broker_name)
            .y_desc("leader")
            .x_desc("seconds since the run began")
            .draw()
            .map_err(drawing)?;
        chart
            .draw_series(p.elections.iter().map(|(t, _)| {
                PathElement::new(
                    vec![(*t, -1.5), (*t, n - 0.5)],
                    colour::ELECTION.mix(0.6).stroke_width(1),
                )
            }))
            .map_err(drawing)?;
        chart
            .draw_series(LineSeries::new(
                steps(&p.leader, end, |l| l.map_or(-1.0, lane)),
                colour::LEADER.stroke_width(2),
            ))
            .map_err(drawing)?;
        leader_area
            .draw_text(
                &format!("{} election(s), each a violet tick", p.elections.len()),
                &("sans-serif", 12).into_font().color(&colour::ELECTION),
                (100, 8),
            )
            .map_err(drawing)?;

        // The leader epoch.
        let top = p.epoch.iter().map(|e| e.1).max().unwrap_or(0).max(1) as f64 * 1.1;
        let mut chart = chart_on(&epoch_area, end, -1.0..top, 80)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .y_labels(5)
            .y_label_formatter(&|y: &f64| format!("{y:.0}"))
            .y_desc("leader epoch")
            .x_desc("seconds since the run began")
            .draw()
            .map_err(drawing)?;
        chart
            .draw_series(LineSeries::new(
                steps(&p.epoch, end, |e| *e as f64),
                colour::EPOCH.stroke_width(2),
            ))
            .map_err(drawing)?;

        // ISR (upper half of a broker's lane) and ELR (lower half).
        let names = brokers.clone();
        let lane_name = move |y: &f64| {
            let i = (y - 0.5).round();
            if (y - 0.5 - i).abs() > 0.01 || i < 0.0 {
                String::new()
            } else {
                names
                    .get(i as usize)
                    .map_or(String::new(), |b| format!("broker {b}"))
            }
        };
        let mut chart = chart_on(&lanes_area, end, 0.0..n, 80)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .y_labels(2 * brokers.len() + 1)
            .y_label_formatter(&lane_name)
            .y_desc("ISR / ELR")
            .x_desc("seconds since the run began")
            .draw()
            .map_err(drawing)?;
        for &b in &brokers {
            let y = lane(b);
            chart
                .draw_series(membership(&p.isr, b, end).into_iter().map(|(s, e)| {
                    Rectangle::new([(s, y + 0.52), (e, y + 0.92)], colour::ISR.filled())
                }))
                .map_err(drawing)?;
            chart
                .draw_series(membership(&p.elr, b, end).into_iter().map(|(s, e)| {
                    Rectangle::new([(s, y + 0.08), (e, y + 0.48)], colour::ELR.filled())
                }))
                .map_err(drawing)?;
        }
        lanes_area
            .draw_text(
                "green: in the ISR; gold: in the ELR",
                &("sans-serif", 12).into_font().color(&BLACK),
                (100, 8),
            )
            .map_err(drawing)?;

        // The leader's HW, its last value written at its end.
        let top = p.hw.iter().map(|h| h.1).max().unwrap_or(0).max(1) as f64 * 1.15;
        let mut chart = chart_on(&hw_area, end, 0.0..top, 80)?;
        chart
            .configure_mesh()
            .max_light_lines(1)
            .y_label_formatter(&|y: &f64| format!("{y:.0}"))
            .y_desc("leader's HW")
            .x_desc("seconds since the run began")
            .draw()
            .map_err(drawing)?;
        chart
            .draw_series(LineSeries::new(
                steps(&p.hw, end, |h| *h as f64),
                colour::HW.stroke_width(2),
            ))
            .map_err(drawing)?;
        let last = match p.hw.last() {
            Some((_, hw)) => format!("HW {hw}"),
            None => "no HW traced".to_string(),
        };
        let at = p.hw.last().map_or(0.0, |h| h.1 as f64);
        chart
            .draw_series([Text::new(
                last,
                (end * 0.9, (at + top * 0.04).min(top * 0.95)),
                ("sans-serif", 13).into_font().color(&colour::HW),
            )])
            .map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

fn chart_on<'a, 'b>(
    area: &'b Area<'a>,
    end: f64,
    y: std::ops::Range<f64>,
    y_labels: u32,
) -> Result<
    ChartContext<
        'b,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    String,
> {
    ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(y_labels)
        .build_cartesian_2d(0.0..end, y)
        .map_err(drawing)
}
