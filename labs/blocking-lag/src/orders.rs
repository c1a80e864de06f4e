//! The report that reads a database: the same orders as `report`, in a
//! SQLite table, and the two ways a handler can hand them to the client:
//! read them all and render one body, or read a page, send it, read the next.
//!
//! The table is the report's rows (`id`, `total = id * 7919 % 1000`, a
//! 20-byte note) with the report's order as its primary key, so "ORDER BY
//! total, id" is a walk along the table and both deliveries render exactly
//! the bytes `report::build_report` renders. It lives in SQLite's `memdb`
//! VFS: no file exists, so none can be left behind, even by a killed lab.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags, params};

/// The name of the report server's database. In the memdb VFS a name that
/// starts with `/` is shared by every connection of one process, and the
/// bytes die with the last connection (or the process).
pub const DB_NAME: &str = "/blocking-lag-orders";

/// One order, as the database hands it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: i64,
    pub total: i64,
    pub note: String,
}

/// Opens the memdb database `name` and fills it with `rows` orders, inside
/// SQLite (a recursive CTE), so building it is quick and allocates nothing
/// in Rust.
pub fn open_orders(name: &str, rows: usize) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let connection = Connection::open_with_flags(format!("file:{name}?vfs=memdb"), flags)
        .context("opening the memdb database")?;
    connection
        .execute_batch(
            "CREATE TABLE orders (id INTEGER NOT NULL, total INTEGER NOT NULL, \
             note TEXT NOT NULL, PRIMARY KEY (total, id)) WITHOUT ROWID",
        )
        .context("creating the orders table")?;
    // The rows are generated in the table's own order, so that every insert
    // appends to the B-tree: the ids whose total is t are t * 679 % 1000,
    // then every 1000th after it (679 is 7919's inverse modulo 1000). A
    // recursive CTE hands its rows on in the order it makes them.
    connection
        .execute(
            "INSERT INTO orders WITH RECURSIVE pair(total, n) AS (SELECT 0, 0 UNION ALL \
             SELECT CASE WHEN (total * 679) % 1000 + 1000 * (n + 1) < ?1 THEN total ELSE total + 1 END, \
                    CASE WHEN (total * 679) % 1000 + 1000 * (n + 1) < ?1 THEN n + 1 ELSE 0 END \
             FROM pair WHERE total < 1000) \
             SELECT (total * 679) % 1000 + 1000 * n, total, 'xxxxxxxxxxxxxxxxxxxx' FROM pair \
             WHERE total < 1000 AND (total * 679) % 1000 + 1000 * n < ?1",
            params![rows as i64],
        )
        .context("filling the orders table")?;
    Ok(connection)
}

fn push_csv_line(csv: &mut String, order: &Order) {
    // Writing to a String cannot fail.
    let _ = writeln!(csv, "{},{},{}", order.id, order.total, order.note);
}

// ANCHOR: in_memory
/// The report built in memory: every order into a `Vec`, then the whole CSV
/// into one `String`, then (in the handler) one body. Memory grows with the
/// report, and the first byte leaves when the last row is rendered.
pub fn report_in_memory(connection: &Connection) -> Result<String> {
    let mut statement =
        connection.prepare_cached("SELECT id, total, note FROM orders ORDER BY total, id")?;
    let orders: Vec<Order> = statement
        .query_map([], |row| {
            Ok(Order {
                id: row.get(0)?,
                total: row.get(1)?,
                note: row.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut csv = String::new();
    for order in &orders {
        push_csv_line(&mut csv, order);
    }
    Ok(csv)
}
// ANCHOR_END: in_memory

// ANCHOR: pages
/// The report read in pages: each page is one short query that starts after
/// the last key of the previous page ("keyset" paging: no OFFSET, so page
/// 100 costs what page 1 costs, and no read transaction stays open between
/// pages). Each rendered page goes to `send`; when `send` says the client is
/// gone, reading stops. Returns the pages sent.
pub fn report_in_pages(
    connection: &Connection,
    page_rows: usize,
    mut send: impl FnMut(String) -> bool,
) -> Result<usize> {
    let mut statement = connection.prepare_cached(
        "SELECT id, total, note FROM orders WHERE (total, id) > (?1, ?2) \
         ORDER BY total, id LIMIT ?3",
    )?;
    let (mut after_total, mut after_id) = (-1_i64, -1_i64);
    let mut pages = 0;
    loop {
        let mut page = String::with_capacity(page_rows * 32);
        let mut rows = statement.query(params![after_total, after_id, page_rows as i64])?;
        let mut in_page = 0;
        while let Some(row) = rows.next()? {
            let order = Order {
                id: row.get(0)?,
                total: row.get(1)?,
                note: row.get(2)?,
            };
            push_csv_line(&mut page, &order);
            (after_total, after_id) = (order.total, order.id);
            in_page += 1;
        }
        if in_page == 0 {
            return Ok(pages);
        }
        pages += 1;
        if !send(page) {
            return Ok(pages);
        }
        if in_page < page_rows {
            return Ok(pages);
        }
    }
}
// ANCHOR_END: pages
