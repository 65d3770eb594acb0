//! Tables of rows, built from column descriptors, and their text form for
//! the terminal.
//!
//! A [`Column`] is a header, an alignment and the function that renders its
//! cell for a row; a [`Table`] is the cells of every row under every
//! column, with a title, gaps between groups of rows, and notes under it.

use std::fmt::Write as _;

/// Where a column's cells sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Names: flush left.
    Left,
    /// Numbers: flush right.
    Right,
}

/// Renders one cell of a row of `R`s.
type Cell<'a, R> = Box<dyn Fn(&R) -> String + 'a>;

/// One column of a table of `R`s.
pub struct Column<'a, R> {
    header: String,
    align: Align,
    cell: Cell<'a, R>,
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
    /// What the table shows.
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// How each column's cells sit.
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
            breaks: Vec::new(),
            notes: Vec::new(),
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

    /// The table as aligned text.
    pub fn text(&self) -> String {
        let mut lines = vec![self.headers.clone()];
        lines.extend(self.rows.iter().cloned());
        let widths = widths(&lines);
        let mut out = format!("{}\n", self.title);
        for (i, line) in lines.iter().enumerate() {
            if i > 0 && self.breaks.contains(&(i - 1)) {
                out.push('\n');
            }
            out.push_str(self.line_of(line, &widths).trim_end());
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    fn line_of(&self, cells: &[String], widths: &[usize]) -> String {
        let mut line = String::new();
        for ((cell, &w), align) in cells.iter().zip(widths).zip(&self.aligns) {
            let _ = match align {
                Align::Left => write!(line, "{cell:<w$}  "),
                Align::Right => write!(line, "{cell:>w$}  "),
            };
        }
        line
    }
}

/// The width of each column: its widest cell, in characters.
fn widths(lines: &[Vec<String>]) -> Vec<usize> {
    let width = |c: usize| {
        lines
            .iter()
            .map(|l| l.get(c).map_or(0, |s| s.chars().count()))
            .max()
            .unwrap_or(0)
    };
    (0..lines[0].len()).map(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squares() -> Table {
        let columns = [
            Column::name("n", |n: &u32| format!("#{n}")),
            Column::number("square", |n: &u32| (n * n).to_string()),
        ];
        Table::new("squares", &columns, &[3, 4, 12])
            .grouped(&[3, 4, 12], |n| *n < 10)
            .noted(["small, then large".to_string()])
    }

    #[test]
    fn columns_render_each_row_under_their_header() {
        let table = squares();
        assert_eq!(table.headers, ["n", "square"]);
        assert_eq!(table.aligns, [Align::Left, Align::Right]);
        assert_eq!(table.rows[2], ["#12", "144"]);
        assert_eq!(table.breaks, [2]);
    }

    #[test]
    fn text_aligns_names_left_numbers_right_and_gaps_groups() {
        let text = squares().text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "squares",
                "n    square",
                "#3        9",
                "#4       16",
                "",
                "#12     144",
                "small, then large"
            ]
        );
    }
}
