//! Tables built from columns, each a header, an alignment and the cell it
//! renders for a row, as aligned text for the terminal and as Markdown.

use std::fmt::Write as _;

/// Where a column's cells sit: names left, numbers right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One column of a table of `R`s.
pub struct Column<'a, R> {
    header: String,
    align: Align,
    cell: Box<dyn Fn(&R) -> String + 'a>,
}

impl<'a, R> Column<'a, R> {
    /// A column of names, left-aligned.
    pub fn name(header: impl Into<String>, cell: impl Fn(&R) -> String + 'a) -> Self {
        Self::new(header, Align::Left, cell)
    }

    /// A column of numbers, right-aligned.
    pub fn number(header: impl Into<String>, cell: impl Fn(&R) -> String + 'a) -> Self {
        Self::new(header, Align::Right, cell)
    }

    fn new(header: impl Into<String>, align: Align, cell: impl Fn(&R) -> String + 'a) -> Self {
        Self {
            header: header.into(),
            align,
            cell: Box::new(cell),
        }
    }
}

/// A table: a title, headers, rows of cells, and notes under it.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub headers: Vec<String>,
    pub aligns: Vec<Align>,
    /// The cells, one vector per row.
    pub rows: Vec<Vec<String>>,
    /// Rows before which the text form leaves a blank line.
    pub breaks: Vec<usize>,
    /// Lines under the table.
    pub notes: Vec<String>,
}

impl Table {
    /// The cells of `rows` under `columns`.
    pub fn new<R>(title: &str, columns: &[Column<'_, R>], rows: &[R]) -> Self {
        let cells = |row: &R| columns.iter().map(|c| (c.cell)(row)).collect();
        Self {
            title: title.to_string(),
            headers: columns.iter().map(|c| c.header.clone()).collect(),
            aligns: columns.iter().map(|c| c.align).collect(),
            rows: rows.iter().map(cells).collect(),
            ..Self::default()
        }
    }

    /// The table with a gap before each row of `rows` whose `key` differs
    /// from the row before.
    pub fn grouped<R, K: PartialEq>(mut self, rows: &[R], key: impl Fn(&R) -> K) -> Self {
        self.breaks = (1..rows.len())
            .filter(|&i| key(&rows[i]) != key(&rows[i - 1]))
            .collect();
        self
    }

    /// The table with `notes` added under it.
    pub fn noted(mut self, notes: impl IntoIterator<Item = String>) -> Self {
        self.notes.extend(notes);
        self
    }

    /// The header line, then the rows.
    fn lines(&self) -> impl Iterator<Item = &Vec<String>> {
        std::iter::once(&self.headers).chain(&self.rows)
    }

    /// The table as aligned text, two spaces between columns.
    pub fn text(&self) -> String {
        let width = |c: usize| self.lines().map(|l| l[c].chars().count()).max();
        let widths: Vec<usize> = (0..self.headers.len()).filter_map(width).collect();
        let mut out = format!("{}\n", self.title);
        for (i, line) in self.lines().enumerate() {
            if i > 0 && self.breaks.contains(&(i - 1)) {
                out.push('\n');
            }
            let cells = line.iter().zip(&widths).zip(&self.aligns);
            let padded: Vec<String> = cells
                .map(|((cell, &w), align)| match align {
                    Align::Left => format!("{cell:<w$}"),
                    Align::Right => format!("{cell:>w$}"),
                })
                .collect();
            let _ = writeln!(out, "{}", padded.join("  ").trim_end());
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    /// The table in Markdown, under a heading; its rule aligns the cells.
    pub fn markdown(&self) -> String {
        let mut out = format!("## {}\n\n", self.title);
        let rule = self.aligns.iter().map(|a| match a {
            Align::Left => "---",
            Align::Right => "---:",
        });
        let _ = writeln!(out, "| {} |", self.headers.join(" | "));
        let _ = writeln!(out, "|{}|", rule.collect::<Vec<_>>().join("|"));
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.notes.is_empty() {
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}  ");
        }
        out
    }
}
