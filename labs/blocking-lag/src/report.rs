//! The "monthly report": CPU work with no await in it, written twice: once as
//! one synchronous call, once cut into chunks that hand the thread back to the
//! runtime every few thousand rows. Both produce the same bytes.

use std::cmp::Ordering;

/// One row of the report: what an admin export of orders looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    id: u64,
    total: u64,
    note: String,
}

/// Rows in the report's order: by total, then by id.
fn by_total_then_id(left: &Row, right: &Row) -> Ordering {
    left.total
        .cmp(&right.total)
        .then_with(|| left.id.cmp(&right.id))
}

fn make_row(id: u64) -> Row {
    Row {
        id,
        // A cheap, deterministic scramble so the sort has real work to do.
        total: (id * 7919) % 1000,
        note: "x".repeat(20),
    }
}

/// Moves a row out of its slot, leaving an empty note behind.
fn take_row(slot: &mut Row) -> Row {
    Row {
        id: slot.id,
        total: slot.total,
        note: std::mem::take(&mut slot.note),
    }
}

/// Room for the whole CSV up front, so the String never grows (and copies
/// tens of megabytes) halfway through.
fn csv_capacity(rows: usize) -> usize {
    rows * 40 + 64
}

fn push_csv_line(csv: &mut String, row: &Row) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = writeln!(csv, "{},{},{}", row.id, row.total, row.note);
}

/// What a finished report hands back: its size and a checksum, so the two
/// versions can be compared without keeping megabytes around.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Built {
    pub bytes: usize,
    pub checksum: u64,
}

/// FNV-1a, fed piece by piece: order-sensitive, so a wrong sort shows.
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

pub fn checksum(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

// ANCHOR: blocking
/// Builds, sorts and renders `rows` rows in one go. There is no `.await` in
/// here, so whichever thread calls it is busy until it returns: on a tokio
/// worker that means no other task runs on that worker meanwhile.
pub fn build_report(rows: usize) -> Built {
    let mut data: Vec<Row> = (0..rows as u64).map(make_row).collect();
    data.sort_by(by_total_then_id);
    let mut csv = String::with_capacity(csv_capacity(rows));
    for row in &data {
        push_csv_line(&mut csv, row);
    }
    Built {
        bytes: csv.len(),
        checksum: checksum(FNV_START, csv.as_bytes()),
    }
}
// ANCHOR_END: blocking

// ANCHOR: chunked
/// The same report, cooperative: every phase, the sort included, is cut into
/// steps of at most `chunk_rows` rows, and the task yields between steps so
/// the worker can run other tasks (a /health request, the timer, accept).
/// `sort_by` is one opaque call, so the sort becomes a bottom-up merge sort
/// whose merges yield too; a yield only helps where it actually happens.
pub async fn build_report_chunked(rows: usize, chunk_rows: usize) -> Built {
    let chunk_rows = chunk_rows.max(1);
    let mut data: Vec<Row> = Vec::with_capacity(rows);
    for start in (0..rows).step_by(chunk_rows) {
        let end = (start + chunk_rows).min(rows);
        data.extend((start as u64..end as u64).map(make_row));
        tokio::task::yield_now().await;
    }
    // Sort each chunk on its own (short, bounded calls)...
    for chunk in data.chunks_mut(chunk_rows) {
        chunk.sort_by(by_total_then_id);
        tokio::task::yield_now().await;
    }
    // ...then merge neighbouring runs, doubling the run length each pass.
    // Rows move by taking their note out (no copy of the text), and the
    // merge yields every chunk_rows rows like everything else.
    let mut run = chunk_rows;
    let mut since_yield = 0;
    while run < data.len() {
        let mut merged: Vec<Row> = Vec::with_capacity(data.len());
        let mut start = 0;
        while start < data.len() {
            let middle = (start + run).min(data.len());
            let end = (start + 2 * run).min(data.len());
            let (mut left, mut right) = (start, middle);
            while left < middle || right < end {
                // Taking from the left on ties keeps the merge stable, as sort_by is.
                let from_right = right < end
                    && (left == middle
                        || by_total_then_id(&data[right], &data[left]) == Ordering::Less);
                let index = if from_right { &mut right } else { &mut left };
                merged.push(take_row(&mut data[*index]));
                *index += 1;
                since_yield += 1;
                if since_yield >= chunk_rows {
                    since_yield = 0;
                    tokio::task::yield_now().await;
                }
            }
            start = end;
        }
        data = merged;
        run *= 2;
    }
    let mut csv = String::with_capacity(csv_capacity(rows));
    let mut hash = FNV_START;
    for chunk in data.chunks(chunk_rows) {
        let written = csv.len();
        for row in chunk {
            push_csv_line(&mut csv, row);
        }
        // Hashing 30 MB at the end would be one long step of its own.
        hash = checksum(hash, &csv.as_bytes()[written..]);
        tokio::task::yield_now().await;
    }
    // Even freeing a million strings takes milliseconds: free them in chunks too.
    while !data.is_empty() {
        data.truncate(data.len().saturating_sub(chunk_rows));
        tokio::task::yield_now().await;
    }
    Built {
        bytes: csv.len(),
        checksum: hash,
    }
}
// ANCHOR_END: chunked
