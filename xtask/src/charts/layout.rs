//! The pure decisions behind a readable chart, kept apart from plotters so
//! they can be tested: lanes for overlapping segments, rows for mark labels
//! that would run into each other, tick values, legend names.

/// An estimate of a label's width in pixels: about 0.6 em per character in a
/// sans-serif font, generous so that estimates err towards more room.
pub fn text_width(text: &str, font_size: f64) -> f64 {
    text.chars().count() as f64 * font_size * 0.6
}

/// For segments `(start, end, row)`, the lane of each one within its row:
/// the first lane whose last segment ended before this one starts, so two
/// segments that overlap in time on one row never share a lane. Rows are the
/// nearest integer of `row`. Returns `(lane, lanes in that row)` per segment,
/// in input order.
pub fn assign_lanes(segments: &[(f64, f64, f64)]) -> Vec<(usize, usize)> {
    let mut order: Vec<usize> = (0..segments.len()).collect();
    order.sort_by(|&a, &b| {
        let (start_a, _, row_a) = segments[a];
        let (start_b, _, row_b) = segments[b];
        row_a
            .round()
            .total_cmp(&row_b.round())
            .then(start_a.total_cmp(&start_b))
            .then(a.cmp(&b))
    });
    let mut lanes = vec![(0, 1); segments.len()];
    let mut index = 0;
    while index < order.len() {
        let row = segments[order[index]].2.round();
        // The end of the last segment in each lane of this row.
        let mut lane_ends: Vec<f64> = Vec::new();
        let first = index;
        while index < order.len() && segments[order[index]].2.round() == row {
            let (start, end, _) = segments[order[index]];
            let lane = match lane_ends.iter().position(|&lane_end| lane_end < start) {
                Some(free) => free,
                None => {
                    lane_ends.push(f64::NEG_INFINITY);
                    lane_ends.len() - 1
                }
            };
            lane_ends[lane] = end.max(start);
            lanes[order[index]].0 = lane;
            index += 1;
        }
        for &member in &order[first..index] {
            lanes[member].1 = lane_ends.len();
        }
    }
    lanes
}

/// Where a lane sits around its row: lanes spread evenly, centred on the row,
/// at most 0.14 apart and within ±0.4 so neighbouring rows stay apart.
pub fn lane_offset(lane: usize, lanes: usize) -> f64 {
    if lanes <= 1 {
        return 0.0;
    }
    let spacing = (0.8 / (lanes - 1) as f64).min(0.14);
    (lane as f64 - (lanes - 1) as f64 / 2.0) * spacing
}

/// For label spans `(left, right)` in pixels, the row of each label: the
/// first row where it keeps `gap` pixels from every label already there.
pub fn stagger(spans: &[(f64, f64)], gap: f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by(|&a, &b| spans[a].0.total_cmp(&spans[b].0).then(a.cmp(&b)));
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut assigned = vec![0; spans.len()];
    for index in order {
        let (left, right) = spans[index];
        let free = rows.iter().position(|taken| {
            taken.iter().all(|&(other_left, other_right)| {
                right + gap <= other_left || other_right + gap <= left
            })
        });
        let row = match free {
            Some(row) => row,
            None => {
                rows.push(Vec::new());
                rows.len() - 1
            }
        };
        rows[row].push((left, right));
        assigned[index] = row;
    }
    assigned
}

/// Ticks for a log axis from `low` to `high`: 1, 3, 10, 30, ... (or only the
/// powers of ten when that would make more than a dozen ticks).
pub fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    if !(low > 0.0 && high > low) {
        return Vec::new();
    }
    let first = low.log10().floor() as i32;
    let last = high.log10().ceil() as i32;
    let mut ticks = Vec::new();
    for power in first..=last {
        let decade = 10f64.powi(power);
        for step in [1.0, 3.0] {
            let value = step * decade;
            if value >= low * (1.0 - 1e-9) && value <= high * (1.0 + 1e-9) {
                ticks.push(value);
            }
        }
    }
    if ticks.len() > 12 {
        ticks.retain(|value| (value.log10() - value.log10().round()).abs() < 1e-9);
    }
    ticks
}

/// Integer ticks from `low` to `high` when every value is a whole number and
/// the span is small; `None` leaves the ticks to plotters.
pub fn integer_ticks(values: &[f64], low: f64, high: f64) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|value| value.fract() != 0.0) {
        return None;
    }
    let (first, last) = (low.ceil(), high.floor());
    if last - first > 24.0 || last < first {
        return None;
    }
    let step = ((last - first) / 12.0).ceil().max(1.0);
    let mut ticks = Vec::new();
    let mut value = first;
    while value <= last {
        ticks.push(value);
        value += step;
    }
    Some(ticks)
}

/// Legend names without the part every series shares before a `/`:
/// "full/work", "full/slow" → "/work", "/slow".
pub fn legend_names(names: &[String]) -> Vec<String> {
    let prefix = names.first().and_then(|first| {
        let cut = first.rfind('/')?;
        let prefix = &first[..cut];
        let shared = names.len() > 1
            && names.iter().all(|name| {
                name.len() > cut && name.starts_with(prefix) && name[cut..].starts_with('/')
            });
        shared.then_some(cut)
    });
    names
        .iter()
        .map(|name| match prefix {
            Some(cut) => name[cut..].to_string(),
            None => name.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_segments_on_one_row_get_their_own_lanes() {
        // Three long requests on row 3 (given as 2.8, 2.9, 3.0), one short
        // request after them, and one on another row at the same time.
        let segments = [
            (0.0, 400.0, 2.8),
            (1.0, 400.0, 2.9),
            (2.0, 400.0, 3.0),
            (500.0, 510.0, 3.1),
            (0.0, 400.0, -0.1),
        ];
        let lanes = assign_lanes(&segments);
        assert_eq!(lanes[0], (0, 3));
        assert_eq!(lanes[1], (1, 3));
        assert_eq!(lanes[2], (2, 3));
        assert_eq!(lanes[3], (0, 3), "a free lane is reused");
        assert_eq!(lanes[4], (0, 1), "rows do not share lanes");
        assert!(assign_lanes(&[]).is_empty());
    }

    #[test]
    fn lanes_spread_around_their_row_and_stay_near_it() {
        assert_eq!(lane_offset(0, 1), 0.0);
        assert!((lane_offset(0, 3) + 0.14).abs() < 1e-12);
        assert_eq!(lane_offset(1, 3), 0.0);
        for lanes in 2..40 {
            for lane in 0..lanes {
                assert!(lane_offset(lane, lanes).abs() <= 0.4 + 1e-12);
            }
        }
    }

    #[test]
    fn labels_that_would_touch_move_to_another_row() {
        // "SIGTERM" and "process gone" 3 px apart; a third label far away.
        let rows = stagger(&[(100.0, 150.0), (103.0, 180.0), (400.0, 450.0)], 6.0);
        assert_eq!(rows, vec![0, 1, 0]);
        // A label that fits after the first goes back to row 0.
        let rows = stagger(&[(100.0, 150.0), (103.0, 180.0), (160.0, 200.0)], 6.0);
        assert_eq!(rows, vec![0, 1, 0]);
        assert!(stagger(&[], 6.0).is_empty());
    }

    #[test]
    fn log_ticks_are_ones_and_threes() {
        assert_eq!(log_ticks(2.3, 105.0), vec![3.0, 10.0, 30.0, 100.0]);
        assert_eq!(log_ticks(0.5, 12.0), vec![1.0, 3.0, 10.0]);
        let wide = log_ticks(0.01, 1e6);
        assert_eq!(wide.len(), 9, "{wide:?}");
        assert!(log_ticks(0.0, 10.0).is_empty());
    }

    #[test]
    fn integer_data_gets_integer_ticks() {
        assert_eq!(
            integer_ticks(&[1.0, 2.0, 3.0, 4.0], 0.88, 4.12),
            Some(vec![1.0, 2.0, 3.0, 4.0])
        );
        assert_eq!(integer_ticks(&[1.5], 0.0, 4.0), None);
        assert_eq!(integer_ticks(&[0.0, 1000.0], 0.0, 1000.0), None);
        let many = integer_ticks(&[0.0, 24.0], 0.0, 24.0).unwrap();
        assert!(many.len() <= 13, "{many:?}");
    }

    #[test]
    fn legends_drop_the_shared_prefix() {
        let names = |list: &[&str]| list.iter().map(|name| name.to_string()).collect::<Vec<_>>();
        assert_eq!(
            legend_names(&names(&["full/work", "full/slow"])),
            names(&["/work", "/slow"])
        );
        assert_eq!(
            legend_names(&names(&["sim-none", "sim-exponential"])),
            names(&["sim-none", "sim-exponential"])
        );
        assert_eq!(
            legend_names(&names(&["a/work", "b/slow"])),
            names(&["a/work", "b/slow"])
        );
        assert_eq!(legend_names(&names(&["only/one"])), names(&["only/one"]));
    }
}
