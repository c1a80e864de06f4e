//! The charts' own tests: colours that follow a series across charts, marks
//! from lists, segments long enough to see, lanes and named ticks.

use super::*;
use super::{prepare::PreparedSeries, spec::ChartFile};
use crate::data::Clock;

const META: &str = r#"{"type":"meta","data":{"lab":"demo","mode":"quick","started":"2026-11-29T18:00:00Z","time_scale":1.0,"params":{},"machine":{"cpu":"Test CPU","cores":2,"os":"linux","kernel":"6.1","rustc":"rustc 1","crates":{}}}}"#;

/// A run: the meta record, then `lines`.
fn run(lines: &[&str]) -> RunData {
    let mut text = format!("{META}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    RunData::parse(&text).expect("a valid run")
}

/// A chart named "c", titled "t", with the rest of its spec in `toml`.
fn chart(toml: &str) -> ChartSpec {
    let file: ChartFile =
        toml::from_str(&format!("[[chart]]\nname = \"c\"\ntitle = \"t\"\n{toml}"))
            .expect("a valid spec");
    file.chart[0].clone()
}

fn prepared(names: &[&str]) -> Prepared {
    Prepared {
        series: names
            .iter()
            .enumerate()
            .map(|(index, name)| PreparedSeries {
                name: name.to_string(),
                points: Vec::new(),
                colour: index,
            })
            .collect(),
        marks: Vec::new(),
        groups: Vec::new(),
    }
}

fn slots(prepared: &Prepared) -> Vec<usize> {
    prepared.series.iter().map(|series| series.colour).collect()
}

#[test]
fn a_series_keeps_its_colour_in_every_chart_of_a_lab() {
    let mut colours = Colours::default();
    let mut all = prepared(&["inline", "spawn-blocking", "rayon", "chunked"]);
    colours.assign(&mut all, 7);
    assert_eq!(slots(&all), [0, 1, 2, 3]);
    // A chart of the fixes only: each keeps the colour it had.
    let mut fixes = prepared(&["rayon", "chunked", "spawn-blocking"]);
    colours.assign(&mut fixes, 7);
    assert_eq!(slots(&fixes), [2, 3, 1]);
    // Known by the name the chart shows (a shared `family/` prefix goes);
    // a new name takes its place in the chart when that slot is free.
    let mut family = prepared(&["run/chunked", "run/inline", "run/new"]);
    colours.assign(&mut family, 7);
    assert_eq!(slots(&family), [3, 0, 2]);
    // Parts played under other names match by place, as before.
    let mut first = prepared(&["health-a", "lag-a"]);
    let mut second = prepared(&["health-b", "lag-b"]);
    colours.assign(&mut first, 7);
    colours.assign(&mut second, 7);
    assert_eq!((slots(&first), slots(&second)), (vec![0, 1], vec![0, 1]));
    // Never two alike in one chart.
    let mut crowded = prepared(&["x", "y", "z", "inline"]);
    colours.assign(&mut crowded, 7);
    assert_eq!(slots(&crowded), [0, 1, 2, 3]);
    let mut wrap = prepared(&["a", "b", "c", "d", "e", "f", "g", "h"]);
    colours.assign(&mut wrap, 7);
    assert_eq!(slots(&wrap), [0, 1, 2, 3, 4, 5, 6, 0]);
}

#[test]
fn a_mark_field_with_several_numbers_gives_one_mark_each() {
    let data = run(&[
        r#"{"type":"sample","data":{"series":"a","values":{"t":1,"y":2}}}"#,
        r#"{"type":"summary","data":{"series":"rounds","values":{"starts":[250.5,600,950],"end":1200}}}"#,
    ]);
    let spec = chart(
        r#"
        kind = "points"
        x = "t"
        y = "y"
        [[chart.mark]]
        series = "rounds"
        field = "starts"
        label = "round"
        [[chart.mark]]
        series = "rounds"
        field = "end"
        label = "end"
        "#,
    );
    let prepared = spec.prepare(&data).expect("prepares");
    let marks: Vec<(&str, f64)> = prepared
        .marks
        .iter()
        .map(|(label, at)| (label.as_str(), *at))
        .collect();
    assert_eq!(
        marks,
        vec![
            ("round 1", 250.5),
            ("round 2", 600.0),
            ("round 3", 950.0),
            ("end", 1200.0)
        ]
    );
}

#[test]
fn a_segment_of_a_millisecond_on_a_long_axis_still_shows() {
    let data = run(&[
        r#"{"type":"sample","data":{"series":"quick","values":{"s":10,"e":10.001,"row":1}}}"#,
        r#"{"type":"sample","data":{"series":"long","values":{"s":0,"e":60000,"row":2}}}"#,
    ]);
    let spec = chart("kind = \"segments\"\nx = \"s\"\nx_end = \"e\"\ny = \"row\"");
    let prepared = spec.prepare(&data).expect("prepares");
    let svg = draw::render(&spec, &prepared, &THEMES[0], "caption").expect("draws");
    // Every segment is a polyline of two points; the shortest is wide
    // enough to see.
    let widths: Vec<i32> = svg
        .split("<polyline")
        .skip(1)
        .filter(|element| element.contains("stroke-width=\"3\""))
        .filter_map(|element| {
            let points = element.split("points=\"").nth(1)?.split('"').next()?;
            let xs: Vec<i32> = points
                .split_whitespace()
                .filter_map(|pair| pair.split(',').next()?.parse().ok())
                .collect();
            Some(xs.last()? - xs.first()?)
        })
        .collect();
    assert_eq!(widths.len(), 2, "{svg}");
    assert!(widths.iter().all(|width| *width >= 4), "{widths:?}");
}

#[test]
fn lanes_are_shared_across_series_and_ticks_are_named() {
    // Two kinds of request on row 3, overlapping in time, at the same
    // offset the lab gave them: lanes part them.
    let data = run(&[
        r#"{"type":"sample","data":{"series":"slow","values":{"s":0,"e":400,"row":2.8}}}"#,
        r#"{"type":"sample","data":{"series":"stream","values":{"s":1,"e":400,"row":2.8}}}"#,
    ]);
    let chart = chart(
        r#"
        kind = "segments"
        x = "s"
        x_end = "e"
        y = "row"
        lanes = true
        y_ticks = [[-1, "server out"], [3, "reset"]]
        clock = "simulated"
        "#,
    );
    assert_eq!(chart.clock, Clock::Simulated);
    assert_eq!(chart.y_ticks[0], (-1.0, String::from("server out")));
    let prepared = chart.prepare(&data).expect("prepares");
    let (slow, stream) = (
        prepared.series[0].points[0].1,
        prepared.series[1].points[0].1,
    );
    assert!(slow != stream, "{slow} {stream}");
    assert!((slow - 3.0).abs() < 0.4 && (stream - 3.0).abs() < 0.4);

    let mut unordered = chart.clone();
    unordered.y_ticks.reverse();
    assert!(unordered.prepare(&data).is_err());
}
