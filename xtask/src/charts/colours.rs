//! One colour per series name across every chart of a lab.

use std::collections::HashMap;

use super::{Prepared, layout};

/// One colour per series name across every chart of a lab, so a strategy a
/// chapter compares looks the same in each of its charts. A series is known
/// by the name its chart shows (`idle` for `hyper-timer/idle` in a chart of
/// `hyper-timer/...` series). A name met for the first time takes the slot of
/// its place in its chart, as charts did before, so series that play the same
/// part under other names (`health-rayon` in one timeline, `health-chunked` in
/// the next) still match; a name met again keeps its slot. Two series of one
/// chart never share a slot: the later one takes the next free slot.
#[derive(Default)]
pub struct Colours {
    slots: HashMap<String, usize>,
}

impl Colours {
    pub fn assign(&mut self, prepared: &mut Prepared, palette_size: usize) {
        let names: Vec<String> = prepared
            .series
            .iter()
            .map(|series| series.name.clone())
            .collect();
        let shown = layout::legend_names(&names);
        let mut taken = Vec::new();
        for (index, (series, name)) in prepared.series.iter_mut().zip(shown).enumerate() {
            let key = name.trim_start_matches('/').to_string();
            let wanted = *self.slots.entry(key).or_insert(index % palette_size);
            let slot = (0..palette_size)
                .map(|step| (wanted + step) % palette_size)
                .find(|slot| !taken.contains(slot))
                .unwrap_or(wanted);
            taken.push(slot);
            series.colour = slot;
        }
    }
}
