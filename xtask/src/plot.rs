//! `plot.svg`: usage per cgroup over time (solid), the phase's water-filled target (dashed),
//! `memory.high` where set (dotted) and the pressure steps (dark verticals).

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use plotters::series::{DashedLineSeries, DottedLineSeries};

use lab_agent::scenario::{Limit, Scenario};

use crate::results::Results;
use crate::summary::Summary;

const MIB: f64 = 1_048_576.0;

#[allow(clippy::cast_precision_loss)] // Plot coordinates only.
fn mib(b: u64) -> f64 {
    b as f64 / MIB
}

#[allow(clippy::cast_precision_loss)] // Plot coordinates only.
fn secs(s: u64) -> f64 {
    s as f64
}

/// Writes the plot to `path`.
pub fn write(path: &Path, scenario: &Scenario, results: &Results, summary: &Summary) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let root = SVGBackend::new(path, (1200, 650)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let duration = secs(scenario.duration);
    let y_max = results
        .samples
        .iter()
        .flat_map(|s| s.cgroups.iter().filter_map(|c| c.current))
        .chain(
            summary
                .phases
                .iter()
                .flat_map(|p| p.cgroups.iter().map(|c| c.target)),
        )
        .max()
        .map_or(64.0, |b| mib(b) * 1.15);
    let title = format!(
        "{} — kernel {} — {}{}",
        summary.scenario,
        summary.kernel_series,
        summary.mode,
        summary
            .max_error_pct
            .map_or_else(String::new, |e| format!(" — max error {e:.1}%"))
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..duration.max(1.0), 0f64..y_max)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .light_line_style(TRANSPARENT)
        .x_desc("seconds")
        .y_desc("memory.current (MiB)")
        .draw()
        .map_err(|e| err(&e))?;

    for step in &scenario.pressure {
        let x = secs(step.at);
        chart
            .draw_series(LineSeries::new(
                vec![(x, 0.0), (x, y_max)],
                ShapeStyle::from(&RGBColor(60, 60, 60)).stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(std::iter::once(Text::new(
                format!("pressure {:.0}M", mib(step.size.0)),
                (x + 0.5, y_max * 0.97),
                ("sans-serif", 13).into_font().color(&RGBColor(90, 90, 90)),
            )))
            .map_err(|e| err(&e))?;
    }

    for (i, spec) in scenario.cgroups.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let usage: Vec<(f64, f64)> = results
            .samples
            .iter()
            .filter_map(|s| {
                s.cgroups
                    .get(i)
                    .filter(|c| c.present)
                    .and_then(|c| c.current)
                    .map(|b| (s.t, mib(b)))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(usage, color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(format!("{} (w{})", spec.name, spec.weight))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });

        for p in &summary.phases {
            if let Some(c) = p.cgroups.iter().find(|c| c.name == spec.name) {
                let y = mib(c.target);
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(secs(p.start), y), (secs(p.end), y)],
                        6,
                        4,
                        color.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?;
            }
        }

        let high: Vec<(f64, f64)> = results
            .samples
            .iter()
            .filter_map(|s| {
                s.cgroups
                    .get(i)
                    .filter(|c| c.present)
                    .and_then(|c| match c.high {
                        Some(Limit::Bytes(b)) => Some((s.t, mib(b).min(y_max))),
                        _ => None,
                    })
            })
            .collect();
        if !high.is_empty() {
            chart
                .draw_series(DottedLineSeries::new(high, 0, 5, move |c| {
                    Circle::new(c, 1, color.filled())
                }))
                .map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
