//! The two colour schemes every chart is drawn in, one for each of mdBook's
//! theme families.

use plotters::style::{RGBAColor, RGBColor};

/// How many series colours a theme has.
pub const PALETTE_SIZE: usize = 7;

/// One colour scheme for one of mdBook's theme families.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub name: &'static str,
    pub(super) text: RGBColor,
    pub(super) grid: RGBAColor,
    pub(super) palette: [RGBColor; PALETTE_SIZE],
}

/// The palettes are Okabe and Ito's colour-blind-safe colours (as 0xRRGGBB),
/// ordered per background so the first series always has strong contrast.
const LIGHT_PALETTE: [u32; PALETTE_SIZE] = [
    0x0072B2, 0xD55E00, 0x009E73, 0xCC79A7, 0xE69F00, 0x56B4E9, 0x404040,
];
const DARK_PALETTE: [u32; PALETTE_SIZE] = [
    0x56B4E9, 0xE69F00, 0x00C08C, 0xE08FBF, 0xF0E442, 0xFF7F2A, 0xC8C8C8,
];

/// Light (mdBook's light and rust themes, and print) and dark (coal, navy, ayu).
pub const THEMES: [Theme; 2] = [
    Theme::new("light", 0x262626, RGBAColor(0, 0, 0, 0.12), LIGHT_PALETTE),
    Theme::new(
        "dark",
        0xDDDDDD,
        RGBAColor(255, 255, 255, 0.14),
        DARK_PALETTE,
    ),
];

impl Theme {
    const fn new(
        name: &'static str,
        text: u32,
        grid: RGBAColor,
        palette: [u32; PALETTE_SIZE],
    ) -> Theme {
        let mut colours = [RGBColor(0, 0, 0); PALETTE_SIZE];
        let mut index = 0;
        while index < PALETTE_SIZE {
            colours[index] = rgb(palette[index]);
            index += 1;
        }
        Theme {
            name,
            text: rgb(text),
            grid,
            palette: colours,
        }
    }

    /// The colour of palette slot `slot` (wrapping past the last).
    pub(super) fn colour(&self, slot: usize) -> RGBColor {
        self.palette[slot % PALETTE_SIZE]
    }
}

const fn rgb(hex: u32) -> RGBColor {
    RGBColor((hex >> 16) as u8, (hex >> 8) as u8, hex as u8)
}
